// POST /v1/messages with a thinking budget on the real daemons (engined
// reading the tiny model's experts in-process, the gateway): the budget is
// enforced by engined, so a reply whose random thinking would run to
// max_tokens has its thinking block closed at the budget and a text block
// after it. (The exact count, N thinking tokens for a budget of N, is
// checked in engined's own suite: tests/engined/serving/think_budget_test.cpp.)
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "tests/gateway/stack_fixture.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

using json = nlohmann::json;
using testing::in_process;
using testing::ok_post;
using testing::Stack;

constexpr int kBudget = 64;
constexpr int kMaxTokens = kBudget + 160;

json request(const json& thinking) {
  return {{"model", "kimi-k3"},
          {"max_tokens", kMaxTokens},
          {"messages", {{{"role", "user"}, {"content", "Think, then answer."}}}},
          {"thinking", thinking},
          {"temperature", 1.0},
          {"seed", 7}};
}

TEST(MessagesStack, TheThinkingBudgetClosesTheThinkingBlock) {
  Stack s(in_process());
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  // Without a budget (adaptive: thinking on, no budget_tokens) the tiny
  // model's random thinking runs through max_tokens: only a cut thinking
  // block.
  const json free = ok_post(s, "/v1/messages", request({{"type", "adaptive"}}));
  EXPECT_EQ(free["stop_reason"], "max_tokens") << free.dump();
  ASSERT_EQ(free["content"].size(), 1u) << free.dump();
  EXPECT_EQ(free["content"][0]["type"], "thinking");
  EXPECT_EQ(free["usage"]["output_tokens"], kMaxTokens);

  // With budget_tokens: the thinking block ends at the budget, then the
  // answer's text, within max_tokens.
  const json r =
      ok_post(s, "/v1/messages", request({{"type", "enabled"}, {"budget_tokens", kBudget}}));
  ASSERT_GE(r["content"].size(), 2u) << r.dump();
  EXPECT_EQ(r["content"][0]["type"], "thinking");
  EXPECT_FALSE(r["content"][0]["thinking"].get<std::string>().empty());
  EXPECT_EQ(r["content"][1]["type"], "text");
  EXPECT_FALSE(r["content"][1]["text"].get<std::string>().empty()) << r.dump();
  EXPECT_LE(r["usage"]["output_tokens"].get<int>(), kMaxTokens);
  // The random thinking ran to the budget (it does not close sooner), then
  // the closing sequence (6 tokens at least) and the text.
  EXPECT_GT(r["usage"]["output_tokens"].get<int>(), kBudget) << r.dump();
}

}  // namespace
}  // namespace k3
