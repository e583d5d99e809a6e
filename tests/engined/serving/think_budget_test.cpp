// The think budget in engined's loop on the tiny random-weights model
// (engined/serving/think_budget.h): with a budget of N the think channel
// holds exactly N tokens, then its closing sequence, then the answer goes on
// (free, or under the rest of the constraint); and the requests that cannot
// carry a budget are refused.
#include "engined/serving/think_budget.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engined/serving/constraint_compiler.h"
#include "shared/chat/xtml_tokens.h"
#include "shared/grammar/output_forms.h"
#include "tests/engined/serving/loop_util.h"

namespace k3::engined {
namespace {

namespace v1 = k3serve::v1;

using Reply = testing::LoopReply;

Reply run(EngineLoop& loop, ServeRequest r) {
  return testing::run_to_end(loop, std::move(r));
}

// How the reply splits: the tokens before the first control token (the
// thinking), and the closing sequence's tokens (up to its 4th control).
struct Split {
  int64_t thinking = 0;
  size_t closing_end = 0;  // index after the closing sequence (0: not closed)
};
Split split(const grammar::VocabIndex& vocab, const std::vector<int32_t>& tokens) {
  Split s;
  int controls = 0;
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (vocab.control_symbol(tokens[i]) < 0) {
      if (controls == 0) ++s.thinking;
      continue;
    }
    if (++controls == 4) {
      s.closing_end = i + 1;
      break;
    }
  }
  return s;
}

class ThinkBudgetServing : public ::testing::Test {
 protected:
  void SetUp() override {
    constraints_ = ConstraintCompiler::load(testing::tiny_model_dir());
    auto tok = tokenizer::Tokenizer::load(testing::tiny_model_dir());
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_.emplace(std::move(*tok));
    loop_ = testing::make_loop(/*sessions=*/2);
  }

  ServeRequest request(const v1::OutputConstraint& c, uint64_t seed, int64_t max_tokens) {
    auto compiled = constraints_->compile(c);
    EXPECT_TRUE(compiled.ok()) << compiled.status();
    ServeRequest r;
    r.request_id = cat("think-", seed);
    r.prompt = {5, 17, 300, 42};
    r.max_tokens = max_tokens;
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    r.constraint = compiled.ok() ? *compiled : nullptr;
    r.think_budget = c.think_budget_tokens();
    r.constraint_think_only = constrains_think_only(c);
    return r;
  }

  std::shared_ptr<ConstraintCompiler> constraints_;
  std::optional<tokenizer::Tokenizer> tok_;
  std::unique_ptr<EngineLoop> loop_;
};

// Nothing else to enforce: exactly N thinking tokens, the closing sequence,
// and an answer that goes on to max_tokens (the random model rarely ends
// it sooner) instead of stopping where the think-only grammar is complete.
TEST_F(ThinkBudgetServing, TheThinkChannelClosesAfterExactlyTheBudget) {
  v1::OutputConstraint c;
  c.set_thinking(true);
  c.set_tool_choice(v1::OutputConstraint::TOOL_CHOICE_AUTO);
  ASSERT_FALSE(constrains_think_only(c));  // no budget: nothing to enforce
  for (int64_t budget : {1, 5, 23}) {
    c.set_think_budget_tokens(static_cast<uint32_t>(budget));
    ASSERT_TRUE(constrains_think_only(c));
    for (uint64_t seed = 1; seed <= 3; ++seed) {
      const int64_t max_tokens = budget + 40;
      ServeRequest r = request(c, seed, max_tokens);
      const grammar::VocabIndex& v = r.constraint->vocab();
      Reply reply = run(*loop_, r);
      ASSERT_EQ(reply.end.kind, ServeEvent::Kind::kFinished) << reply.end.status;
      const Split s = split(v, reply.tokens);
      EXPECT_EQ(s.thinking, budget) << "seed " << seed;
      ASSERT_GT(s.closing_end, 0u) << "seed " << seed << ": the channel never closed";
      // The closing sequence is the markup, whatever pieces spell it.
      auto closing = tok_->decode(std::vector<int32_t>(reply.tokens.begin() + budget,
                                                       reply.tokens.begin() + s.closing_end));
      ASSERT_TRUE(closing.ok()) << closing.status();
      EXPECT_EQ(*closing, grammar::think_close_markup());
      // The answer went on after it.
      EXPECT_GT(reply.tokens.size(), s.closing_end) << "seed " << seed;
      auto parsed = chat::parse_output_ids(*tok_, reply.tokens, /*thinking=*/true);
      ASSERT_TRUE(parsed.ok()) << parsed.status();
      EXPECT_FALSE(parsed->reasoning_content.empty());
    }
  }
}

// Under a schema the budget closes the channel and the JSON still follows
// (the rest of the constraint, closing in time for max_tokens).
TEST_F(ThinkBudgetServing, UnderASchemaTheAnswerFollowsTheBudget) {
  v1::OutputConstraint c;
  c.set_thinking(true);
  c.set_body(v1::OutputConstraint::JSON_SCHEMA);
  c.set_json_schema(R"({"type":"object","properties":{"n":{"type":"integer"}},
                        "required":["n"],"additionalProperties":false})");
  c.set_think_budget_tokens(7);
  ASSERT_FALSE(constrains_think_only(c));
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    ServeRequest r = request(c, seed, 120);
    const grammar::VocabIndex& v = r.constraint->vocab();
    Reply reply = run(*loop_, r);
    ASSERT_EQ(reply.end.kind, ServeEvent::Kind::kFinished) << reply.end.status;
    EXPECT_EQ(reply.end.reason, StopReason::kStop) << "seed " << seed;
    EXPECT_EQ(split(v, reply.tokens).thinking, 7) << "seed " << seed;
    auto parsed = chat::parse_output_ids(*tok_, reply.tokens, /*thinking=*/true);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_TRUE(parsed->ended);
    auto j = nlohmann::json::parse(parsed->content, nullptr, /*allow_exceptions=*/false);
    ASSERT_TRUE(j.is_object()) << parsed->content;
    EXPECT_TRUE(j["n"].is_number_integer()) << parsed->content;
  }
}

// Without a budget the same think-only grammar is never asked for, and the
// think channel runs on (here to max_tokens' closing in time, under a
// schema): the budget is what closes it early.
TEST_F(ThinkBudgetServing, WithoutABudgetTheChannelRunsOn) {
  v1::OutputConstraint c;
  c.set_thinking(true);
  c.set_body(v1::OutputConstraint::JSON_OBJECT);
  ServeRequest r = request(c, 1, 120);
  const grammar::VocabIndex& v = r.constraint->vocab();
  Reply reply = run(*loop_, r);
  ASSERT_EQ(reply.end.kind, ServeEvent::Kind::kFinished) << reply.end.status;
  EXPECT_GT(split(v, reply.tokens).thinking, 7);
}

TEST_F(ThinkBudgetServing, ABudgetWithoutThinkingOrConstraintIsRefused) {
  v1::OutputConstraint c;
  c.set_tool_choice(v1::OutputConstraint::TOOL_CHOICE_AUTO);
  c.set_think_budget_tokens(4);
  auto compiled = constraints_->compile(c);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(compiled.status().message().find("think_budget_tokens"), std::string::npos);

  ServeRequest r;
  r.prompt = {5, 17};
  r.max_tokens = 8;
  r.think_budget = 4;
  auto h = loop_->submit(r);
  ASSERT_FALSE(h.ok());
  EXPECT_EQ(h.status().code(), absl::StatusCode::kInvalidArgument);
  r.think_budget = -1;
  EXPECT_FALSE(loop_->submit(r).ok());
}

}  // namespace
}  // namespace k3::engined
