// /stats of k3ctl chat: what it counts and how it reads.
#include "tools/k3ctl/chat_stats.h"

#include <gtest/gtest.h>

namespace k3::tools {
namespace {

ChatReply reply(uint32_t prompt, uint32_t completion, uint32_t cached) {
  ChatReply r;
  r.has_done = true;
  r.done.mutable_usage()->set_prompt_tokens(prompt);
  r.done.mutable_usage()->set_completion_tokens(completion);
  r.done.mutable_usage()->set_cached_tokens(cached);
  return r;
}

TEST(ChatStats, LastReplyAndSessionTotals) {
  ChatStats s;
  EXPECT_EQ(s.text(),
            "no reply yet\nsession: replies 0 (cancelled 0), prompt 0 tokens, completion 0 "
            "tokens, - tokens/s while generating\n");
  s.add(reply(10, 20, 0), 0.5, 2.5);  // 20 tokens in the 2 s after the first
  s.add_cancelled();
  s.add(reply(40, 30, 25), 0.25, 1.25);  // 30 tokens in 1 s
  EXPECT_EQ(s.text(),
            "last reply: prompt 40 tokens (cached 25, restored 0), completion 30 tokens; first "
            "token after 0.25 s, 30.0 tokens/s, 1.25 s in all\n"
            "session: replies 2 (cancelled 1), prompt 50 tokens, completion 50 tokens, 16.7 "
            "tokens/s while generating\n");
}

TEST(ChatStats, AReplyWithNothingStreamedHasNoFirstTokenTime) {
  ChatStats s;
  s.add(reply(5, 0, 0), -1, 0.5);
  EXPECT_NE(s.text().find("first token after - s, - tokens/s, 0.50 s in all"), std::string::npos)
      << s.text();
}

}  // namespace
}  // namespace k3::tools
