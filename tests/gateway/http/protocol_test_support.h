// What the chat and completion protocol tests share (chat_protocol_test.cpp,
// completion_protocol_test.cpp): EXPECT_CONTAINS, the message of a body a
// parser must refuse, and a message with logprobs to write back.
#pragma once

#include <string>
#include <string_view>
#include <vector>

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
  return refusal([](std::string_view b) { return parse_chat_request(b); }, body);
}
inline std::string completion_error(std::string_view body) {
  return refusal([](std::string_view b) { return parse_completion_request(b); }, body);
}

// "hi" with its logprob (-0.5, text offset 3) and two alternatives, one of
// them not UTF-8 ("\xff").
inline OutputMessage message_with_logprobs() {
  LogprobEntry e;
  e.token = "hi";
  e.bytes = "hi";
  e.logprob = -0.5f;
  e.text_offset = 3;
  e.top = {{7, "hi", "hi", -0.5f}, {9, "\xff", "\xff", -2.0f}};
  OutputMessage m;
  m.content = "hi";
  m.logprobs = std::vector<LogprobEntry>{e};
  return m;
}

}  // namespace k3::gateway

#define EXPECT_CONTAINS(text, part)                                          \
  do {                                                                       \
    const std::string k3_text_ = (text);                                     \
    EXPECT_NE(k3_text_.find(part), std::string::npos) << "in: " << k3_text_; \
  } while (0)
