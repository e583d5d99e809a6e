// What the request parsers' tests share (chat_protocol_test.cpp,
// completion_protocol_test.cpp): EXPECT_CONTAINS, and the message of a body
// a parser must refuse.
#pragma once

#include <string>
#include <string_view>

#include <gtest/gtest.h>

#include "gateway/http/chat_protocol.h"
#include "gateway/http/completion_protocol.h"

namespace k3::gateway {

// The error message of parsing `body` with `parse`, which must refuse it
// with InvalidArgument ("" when it did not).
template <typename Parse>
std::string refusal(Parse parse, std::string_view body) {
  auto r = parse(body);
  EXPECT_FALSE(r.ok()) << body;
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << body;
  return msg(r.status());
}

inline std::string chat_error(std::string_view body) {
  return refusal(parse_chat_request, body);
}
inline std::string completion_error(std::string_view body) {
  return refusal(parse_completion_request, body);
}

}  // namespace k3::gateway

#define EXPECT_CONTAINS(text, part)                                          \
  do {                                                                       \
    const std::string k3_text_ = (text);                                     \
    EXPECT_NE(k3_text_.find(part), std::string::npos) << "in: " << k3_text_; \
  } while (0)
