// A big chunk run in parts (engined/model/chunk_pass.h) on the tiny model, in
// process: the same bits as token-at-a-time whatever the budget, with
// another sequence decoding on the same expert source between the parts,
// a cancel between two parts, and an expert source that completes a work
// item twice.
#include "engined/model/chunk_pass.h"

#include <gtest/gtest.h>

#include <cstring>

#include "engined/experts/source_factory.h"
#include "tests/engined/experts/forwarding_source.h"
#include "tests/test_util.h"

namespace k3::engined {
namespace {

using k3::experts::ExpertSource;

struct Engine {
  std::unique_ptr<Model> model;
  std::unique_ptr<ExpertSource> experts;
};

Engine load(EngineOptions opt) {
  Engine e;
  auto m = Model::load(testing::tiny_model_dir(), {}, opt);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return e;
  e.model = std::move(*m);
  auto x = make_expert_source({}, *e.model);
  EXPECT_TRUE(x.ok()) << x.status();
  if (x.ok()) e.experts = std::move(*x);
  return e;
}

std::vector<int32_t> prompt(int n, int64_t vocab, int salt = 0) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i)
    ids.push_back(static_cast<int32_t>((i * 7919 + 13 + salt * 104729) % vocab));
  return ids;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

// The prompt's last logits and the next token's (after `next`), token at a
// time.
struct Reference {
  std::vector<float> last, after;
};
Reference token_at_a_time(const std::vector<int32_t>& ids, int32_t next, bool int8, float top_p) {
  EngineOptions o;
  o.chunk = 1;
  o.int8_experts = int8;
  o.expert_top_p = top_p;
  Engine e = load(o);
  Reference r;
  if (!e.model) return r;
  auto seq = e.model->new_sequence();
  EXPECT_TRUE(e.model->forward(*e.experts, *seq, ids, 1, &r.last).ok());
  EXPECT_TRUE(e.model->forward(*e.experts, *seq, {next}, 1, &r.after).ok());
  return r;
}

TEST(ChunkPass, SameBitsAsTokenAtATimeWhateverTheBudget) {
  for (bool int8 : {true, false}) {
    for (float top_p : {1.0f, 0.7f}) {
      EngineOptions o;
      o.int8_experts = int8;
      o.expert_top_p = top_p;
      Engine e = load(o);
      ASSERT_TRUE(e.model && e.experts);
      const auto ids = prompt(70, e.model->config().vocab_size);
      const Reference ref = token_at_a_time(ids, 77, int8, top_p);
      // 0: one unit per call, units of 16 rows and 3 experts (the last
      // of 6 rows); 1e9: the whole pass in one call, units as measured.
      for (double budget : {0.0, 1e9}) {
        auto seq = e.model->new_sequence();
        auto pass = e.model->begin_chunk(*seq, ids, /*want_logits=*/true);
        ASSERT_TRUE(pass.ok()) << pass.status();
        if (budget == 0.0) (*pass)->fix_units(16, 3);
        int calls = 0;
        for (;;) {
          auto done = (*pass)->advance(*e.experts, budget);
          ASSERT_TRUE(done.ok()) << done.status();
          ++calls;
          if (*done) break;
        }
        if (budget == 0.0) {
          // 5 row units per dense part: more calls than that per layer.
          EXPECT_GT(calls, 5 * e.model->config().num_hidden_layers);
          EXPECT_EQ((*pass)->rows_per_unit(), 6);
        } else {
          EXPECT_EQ(calls, 1);
        }
        EXPECT_EQ(seq->position, 70);
        EXPECT_TRUE(same_bits((*pass)->logits(), ref.last))
            << "int8 " << int8 << " top_p " << top_p << " budget " << budget;
        // The state it left decodes the next token as token-at-a-time's does.
        std::vector<float> after;
        ASSERT_TRUE(e.model->forward(*e.experts, *seq, {77}, 1, &after).ok());
        EXPECT_TRUE(same_bits(after, ref.after)) << "int8 " << int8 << " top_p " << top_p;
      }
    }
  }
}

TEST(ChunkPass, AnotherSequenceDecodesBetweenItsParts) {
  EngineOptions o;
  Engine e = load(o);
  ASSERT_TRUE(e.model && e.experts);
  const int64_t V = e.model->config().vocab_size;
  const auto ids = prompt(120, V);
  const Reference ref = token_at_a_time(ids, 5, true, 1.0f);
  // The decoder alone: its prompt, then 3 tokens.
  const auto dprompt = prompt(9, V, 1);
  std::vector<std::vector<float>> alone;
  {
    auto d = e.model->new_sequence();
    std::vector<float> l;
    ASSERT_TRUE(e.model->forward(*e.experts, *d, dprompt, 1, &l).ok());
    for (int32_t t : {3, 4, 5}) {
      ASSERT_TRUE(e.model->forward(*e.experts, *d, {t}, 1, &l).ok());
      alone.push_back(l);
    }
  }
  auto d = e.model->new_sequence();
  std::vector<float> l;
  ASSERT_TRUE(e.model->forward(*e.experts, *d, dprompt, 1, &l).ok());
  auto seq = e.model->new_sequence();
  auto pass = e.model->begin_chunk(*seq, ids, true);
  ASSERT_TRUE(pass.ok()) << pass.status();
  (*pass)->fix_units(32, 4);
  std::vector<std::vector<float>> beside;
  int32_t next = 3;
  double seen = 0;
  for (;;) {
    auto done = (*pass)->advance(*e.experts, 0.0);
    ASSERT_TRUE(done.ok()) << done.status();
    EXPECT_GE((*pass)->fraction(), seen);  // progress never goes back
    seen = (*pass)->fraction();
    if (*done) break;
    if (next <= 5) {
      ASSERT_TRUE(e.model->forward(*e.experts, *d, {next++}, 1, &l).ok());
      beside.push_back(l);
    }
  }
  EXPECT_EQ(seen, 1.0);
  ASSERT_EQ(beside.size(), 3u) << "the pass ended before the decoder's 3 steps";
  for (size_t i = 0; i < 3; ++i) EXPECT_TRUE(same_bits(beside[i], alone[i])) << "step " << i;
  EXPECT_TRUE(same_bits((*pass)->logits(), ref.last));
}

TEST(ChunkPass, ACancelEndsItBetweenPartsWithTheStateInvalid) {
  Engine e = load({});
  ASSERT_TRUE(e.model && e.experts);
  auto seq = e.model->new_sequence();
  auto pass = e.model->begin_chunk(*seq, prompt(100, e.model->config().vocab_size), true);
  ASSERT_TRUE(pass.ok()) << pass.status();
  (*pass)->fix_units(16, 4);
  std::atomic<bool> cancel{false};
  auto first = (*pass)->advance(*e.experts, 0.0, &cancel);
  ASSERT_TRUE(first.ok() && !*first);
  cancel = true;
  auto second = (*pass)->advance(*e.experts, 0.0, &cancel);
  EXPECT_EQ(second.status().code(), absl::StatusCode::kCancelled) << second.status();
  EXPECT_FALSE(seq->valid);
  EXPECT_EQ(seq->position, 0);
  // A pass on an invalid state is refused.
  EXPECT_FALSE(e.model->begin_chunk(*seq, {1, 2}, true).ok());
}

// Returns the first completion again in place of the second (whose work
// item then never completes).
class DuplicatingSource : public ForwardingSource {
 public:
  using ForwardingSource::ForwardingSource;
  StatusOr<std::optional<experts::ExpertCompletion>> poll(int timeout_ms) override {
    auto c = ForwardingSource::poll(timeout_ms);
    if (!c.ok() || !c->has_value()) return c;
    if (++seen_ == 1) first_ = **c;
    if (seen_ == 2) return std::optional<experts::ExpertCompletion>(first_);
    return c;
  }

 private:
  int seen_ = 0;
  experts::ExpertCompletion first_;
};

// The routed rows' buffer is not initialised (ffn.cpp's MoePending): a work
// item completed twice, leaving another never written, fails the step
// instead of reading that item's rows.
TEST(ChunkPass, AWorkItemCompletedTwiceFailsInsteadOfLeavingRowsUnwritten) {
  for (bool chunked : {false, true}) {
    Engine e = load({});
    ASSERT_TRUE(e.model && e.experts);
    DuplicatingSource dup(std::move(e.experts));
    auto seq = e.model->new_sequence();
    const auto ids = prompt(40, e.model->config().vocab_size);
    Status st;
    if (chunked) {
      auto pass = e.model->begin_chunk(*seq, ids, true);
      ASSERT_TRUE(pass.ok()) << pass.status();
      auto done = (*pass)->advance(dup, 1e9);
      st = done.status();
    } else {
      std::vector<float> l;
      st = e.model->forward(dup, *seq, ids, 1, &l);
    }
    EXPECT_EQ(st.code(), absl::StatusCode::kInternal) << st;
    EXPECT_NE(st.message().find("malformed completion"), std::string::npos) << st;
  }
}

}  // namespace
}  // namespace k3::engined
