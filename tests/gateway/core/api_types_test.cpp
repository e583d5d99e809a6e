// gateway/core/api_types.h: the finish reasons' names on the wire.
#include "gateway/core/api_types.h"

#include "gtest/gtest.h"

namespace k3::gateway {
namespace {

TEST(Responses, FinishReasonNames) {
  EXPECT_STREQ(finish_reason_name(FinishReason::kStop), "stop");
  EXPECT_STREQ(finish_reason_name(FinishReason::kLength), "length");
  EXPECT_STREQ(finish_reason_name(FinishReason::kToolCalls), "tool_calls");
}

}  // namespace
}  // namespace k3::gateway
