// gateway/http/common_fields.h through both parsers: the k3_expert_top_p
// request extension (engined --expert-top-p per request) parsed on chat and
// completion requests, refused out of (0, 1] naming the field, absent means
// engined's setting. (The other shared fields: chat_protocol_test.cpp.)
#include "gateway/http/common_fields.h"

#include <gtest/gtest.h>

#include "gateway/http/chat_protocol.h"
#include "gateway/http/completion_protocol.h"

namespace k3::gateway {
namespace {

TEST(ExpertTopPField, ParsedOnChatAndCompletion) {
  auto chat =
      parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}],"k3_expert_top_p":0.7})");
  ASSERT_TRUE(chat.ok()) << chat.status();
  ASSERT_TRUE(chat->sampling.expert_top_p.has_value());
  EXPECT_FLOAT_EQ(*chat->sampling.expert_top_p, 0.7f);
  auto done = parse_completion_request(R"({"prompt":"hi","k3_expert_top_p":1})");
  ASSERT_TRUE(done.ok()) << done.status();
  EXPECT_FLOAT_EQ(done->sampling.expert_top_p.value_or(0), 1.0f);
  auto absent = parse_chat_request(R"({"messages":[{"role":"user","content":"hi"}]})");
  ASSERT_TRUE(absent.ok());
  EXPECT_FALSE(absent->sampling.expert_top_p.has_value());
}

TEST(ExpertTopPField, RefusedOutOfRange) {
  for (const char* v : {"0", "-0.5", "1.5", "\"0.7\""}) {
    auto r = parse_chat_request(std::string(R"({"messages":[{"role":"user","content":"hi"}],)") +
                                R"("k3_expert_top_p":)" + v + "}");
    ASSERT_FALSE(r.ok()) << v;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << v;
    EXPECT_NE(std::string(r.status().message()).find("k3_expert_top_p"), std::string::npos)
        << r.status();
  }
}

}  // namespace
}  // namespace k3::gateway
