// Speculative lookahead and expert top-p (issue 11 items 1 and 5): what is
// read changes, what is computed does not (speculation); top-p picks the
// experts its rule names, and 1.0 is today's routing bit for bit.
#include <gtest/gtest.h>

#include <cstring>

#include "engined/experts/source_factory.h"
#include "engined/model/layers.h"
#include "engined/model/model.h"
#include "engined/serving/checkpoint_store.h"
#include "engined/serving/session_pool.h"
#include "tests/test_util.h"

namespace k3::engined {

using k3::experts::ExpertSourceStats;

namespace {

struct Pass {
  std::vector<float> logits;
  ExpertSourceStats experts;
  SpeculationStats spec;
  ForwardTimes times;
};

// Prefill then `decode` greedy tokens, every position's logits kept, with a
// fresh model and in-process source (a small cache: reads really happen).
Pass run(const EngineOptions& opt, const std::vector<int32_t>& prompt, int decode,
         float piece_top_p = 0.0f) {
  Pass r;
  auto m = Model::load(testing::tiny_model_dir(), {}, opt);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return r;
  ExpertSourceOptions xo;
  xo.cache_bytes = 8 * (*m)->config().expert_bytes();
  auto src = make_expert_source(xo, **m);
  EXPECT_TRUE(src.ok()) << src.status();
  if (!src.ok()) return r;
  auto seq = (*m)->new_sequence();
  const int64_t V = (*m)->config().vocab_size;
  std::vector<int32_t> ids = prompt;
  for (int step = 0; step <= decode; ++step) {
    std::vector<Model::Piece> pieces(1);
    pieces[0].seq = seq.get();
    pieces[0].ids = ids;
    pieces[0].want_logits = true;
    pieces[0].expert_top_p = piece_top_p;
    std::vector<float> logits;
    Status s = (*m)->forward_batch(**src, pieces, &logits);
    EXPECT_TRUE(s.ok()) << s;
    if (!s.ok()) return r;
    r.logits.insert(r.logits.end(), logits.begin(), logits.end());
    int32_t best = 0;
    for (int64_t v = 1; v < V; ++v)
      if (logits[v] > logits[best]) best = static_cast<int32_t>(v);
    ids = {best};
  }
  r.experts = (*src)->stats();
  r.spec = (*m)->speculation();
  r.times = (*m)->times();
  return r;
}

const std::vector<int32_t> kPrompt = {5, 17, 99, 3, 250, 41, 7, 1000};

TEST(Speculation, LogitsIdenticalOnAndOffAndCountersMove) {
  EngineOptions off, on;
  off.speculation = SpeculationMode::kOff;
  on.speculation = SpeculationMode::kOn;
  const Pass a = run(off, kPrompt, 12);
  const Pass b = run(on, kPrompt, 12);
  ASSERT_FALSE(a.logits.empty());
  ASSERT_EQ(a.logits.size(), b.logits.size());
  EXPECT_EQ(std::memcmp(a.logits.data(), b.logits.data(), a.logits.size() * sizeof(float)), 0)
      << "speculation changed the logits";
  // Off: nothing predicted, nothing posted.
  EXPECT_EQ(a.spec.posted, 0u);
  EXPECT_EQ(a.experts.speculative, 0u);
  EXPECT_EQ(a.spec.layer_steps, 0u);
  // On: every MoE layer after the first is predicted and scored, guesses
  // go out and some are read; recall of both inputs is measured.
  EXPECT_GT(b.spec.layer_steps, 0u);
  EXPECT_GT(b.spec.actual, 0u);
  EXPECT_GT(b.spec.posted, 0u);
  EXPECT_EQ(b.experts.speculative, b.spec.posted);
  EXPECT_GT(b.experts.speculative_reads, 0u);
  EXPECT_EQ(b.experts.speculative_bytes,
            b.experts.speculative_reads *
                checkpoint::load_model_config(testing::tiny_model_dir())->expert_bytes());
  EXPECT_GT(b.spec.correct[0] + b.spec.correct[1], 0u);
  EXPECT_LE(b.spec.correct[0], b.spec.actual);
  EXPECT_LE(b.spec.correct[1], b.spec.actual);
  EXPECT_GE(b.spec.recall(0), 0.0);
  EXPECT_LE(b.spec.recall(0), 1.0);
  // The same demand requests either way; speculation turns some demand
  // reads into hits (the hidden reads), never the other way round.
  EXPECT_EQ(a.experts.requests, b.experts.requests);
  EXPECT_LE(b.experts.speculative_hits, b.experts.hits);
  EXPECT_EQ(a.experts.speculative_hits, 0u);
  EXPECT_LE(b.experts.reads, a.experts.reads);
}

TEST(Speculation, AutoPredictsAndJudgesWindows) {
  EngineOptions aut;  // the default
  const Pass r = run(aut, kPrompt, 2 * Speculator::kWindowTokens);
  EXPECT_GT(r.spec.layer_steps, 0u);
  EXPECT_GT(r.spec.windows_on + r.spec.windows_off, 0u) << "no window was judged";
}

// One token of the judging tests: layer 1 ran `kUsed` after `guess` was
// predicted for it; demand read `reads` experts (of kEb bytes) and
// speculation `spec_reads`; then the chunk ends on `source`. Whether the
// guess was to be posted.
const std::vector<int64_t> kUsed = {1, 5, 9, 12};
const std::vector<int64_t> kWrong = {0, 2, 3, 4};  // none of them used
constexpr uint64_t kEb = 1000;

bool token(Speculator& sp, const void* source, ExpertSourceStats& now,
           const std::vector<int64_t>& guess, uint64_t reads, uint64_t spec_reads = 0,
           bool copies = false) {
  const bool post = sp.predict(0, 1, guess);
  sp.observe(1, kUsed);
  now.requests += kUsed.size();
  now.reads += reads;
  now.bytes_read += reads * kEb;
  now.speculative_bytes += spec_reads * kEb;
  sp.end_chunk(1, source, now, kEb, copies);
  return post;
}

// Auto starts off: nothing is posted until a judged window shows that the
// reads would pay; a window of right guesses over demand reads turns it on,
// one of wrong guesses turns it off again.
TEST(Speculation, AutoStartsOffAndTurnsOnOnlyWhenItPays) {
  Speculator sp(SpeculationMode::kAuto);
  ExpertSourceStats now;
  for (int64_t t = 0; t < Speculator::kWindowTokens; ++t)
    EXPECT_FALSE(token(sp, &now, now, kUsed, kUsed.size()))
        << "posted before any window was judged, token " << t;
  EXPECT_TRUE(sp.stats().on) << "right guesses over demand reads did not turn it on";
  EXPECT_EQ(sp.stats().windows_on, 1u);
  EXPECT_TRUE(token(sp, &now, now, kUsed, 0));
  Speculator low(SpeculationMode::kAuto);
  for (int64_t t = 0; t < Speculator::kWindowTokens; ++t)
    EXPECT_FALSE(token(low, &now, now, kWrong, kUsed.size()));
  EXPECT_FALSE(low.stats().on);
  EXPECT_EQ(low.stats().windows_off, 1u);
}

// Reads that are copies made by this host's cores (expertd reading from the
// page cache) hide nothing: the same right guesses over demand reads that
// turn auto on above keep it off, window after window, while predictions
// (recall) are still measured. `on` still posts.
TEST(Speculation, CopiesByThisHostsCoresKeepAutoOff) {
  Speculator sp(SpeculationMode::kAuto);
  const int source = 0;
  ExpertSourceStats now;
  for (int64_t t = 0; t < 3 * Speculator::kWindowTokens; ++t)
    EXPECT_FALSE(token(sp, &source, now, kUsed, kUsed.size(), 0, /*copies=*/true)) << "token " << t;
  EXPECT_FALSE(sp.stats().on);
  EXPECT_EQ(sp.stats().windows_on, 0u);
  EXPECT_EQ(sp.stats().windows_off, 3u);
  EXPECT_DOUBLE_EQ(sp.stats().recall(0), 1.0) << "recall is still measured while off";
  Speculator forced(SpeculationMode::kOn);
  ExpertSourceStats f;
  for (int64_t t = 0; t < Speculator::kWindowTokens + 1; ++t)
    EXPECT_TRUE(token(forced, &source, f, kUsed, kUsed.size(), 0, true)) << "token " << t;
}

// On, a window is judged on what speculation really hid: right guesses
// whose reads never served a demand request (they raced it, or were
// bounded in flight) turn it off, and the next window off is estimated
// with that share, so it stays off instead of turning on every other window.
TEST(Speculation, AWindowOnThatHidNothingKeepsItOff) {
  Speculator sp(SpeculationMode::kAuto);
  const int source = 0;
  ExpertSourceStats now;
  // Right guesses; demand still read them all (nothing hidden), and the
  // window on read them speculatively too.
  auto window = [&](bool on) {
    for (int64_t t = 0; t < Speculator::kWindowTokens; ++t)
      token(sp, &source, now, kUsed, kUsed.size(), on ? kUsed.size() : 0);
  };
  window(false);
  ASSERT_TRUE(sp.stats().on) << "right guesses over demand reads did not turn it on";
  window(true);
  EXPECT_FALSE(sp.stats().on) << "a window on that hid nothing kept it on";
  window(false);
  EXPECT_FALSE(sp.stats().on) << "the estimate off forgot that right guesses hid nothing";
  EXPECT_EQ(sp.stats().windows_on, 1u);
  EXPECT_EQ(sp.stats().windows_off, 2u);
}

// A new source under the same model (a placement rebuilt, its counters back
// at 0) restarts the window: wrapped differences must not judge it. Before
// the fix, the wrapped speculative hits read as bytes hidden and turned
// speculation on over guesses that were all wrong.
TEST(Speculation, AWindowIsJudgedOverOneSource) {
  Speculator sp(SpeculationMode::kAuto);
  ExpertSourceStats old_source;
  old_source.requests = old_source.reads = 500;
  old_source.bytes_read = 500 * kEb;
  old_source.speculative_hits = 40;
  old_source.speculative_bytes = 60 * kEb;
  const int source = 0;  // one source throughout, its counters back at 0 below
  sp.end_chunk(1, &source, old_source, kEb, false);
  ExpertSourceStats now;  // from 0
  for (int64_t t = 0; t + 1 < Speculator::kWindowTokens; ++t) {
    EXPECT_FALSE(token(sp, &source, now, kWrong, kUsed.size()));
    EXPECT_FALSE(sp.stats().on) << "token " << t;
  }
  EXPECT_EQ(sp.stats().windows_on + sp.stats().windows_off, 0u)
      << "a window mixing two sources' counters was judged";
  for (int64_t t = 0; t < Speculator::kWindowTokens; ++t)
    token(sp, &source, now, kWrong, kUsed.size());
  EXPECT_FALSE(sp.stats().on);
  EXPECT_EQ(sp.stats().windows_off, 1u) << "the new source's own window was not judged";

  // Another source (another object), counters higher than the first's: the
  // window restarts too, so it is judged only after its own window. Right
  // guesses over demand reads, which would turn it on.
  Speculator two(SpeculationMode::kAuto);
  ExpertSourceStats a, b;
  b.requests = b.reads = 1000;
  b.bytes_read = 1000 * kEb;
  for (int64_t t = 0; t + 1 < Speculator::kWindowTokens; ++t)
    token(two, &a, a, kUsed, kUsed.size());
  token(two, &b, b, kUsed, kUsed.size());
  EXPECT_EQ(two.stats().windows_on + two.stats().windows_off, 0u)
      << "a window over two sources was judged";
  for (int64_t t = 0; t < Speculator::kWindowTokens; ++t) token(two, &b, b, kUsed, kUsed.size());
  EXPECT_EQ(two.stats().windows_on, 1u);
}

TEST(ExpertTopP, ExactSelectionOnKnownWeights) {
  // Scores of 6 experts, no bias: top-4 is {0: 0.9, 2: 0.8, 4: 0.2, 5: 0.1}
  // (sum 2.0: shares 0.45, 0.40, 0.10, 0.05).
  const float score[6] = {0.9f, 0.05f, 0.8f, 0.01f, 0.2f, 0.1f};
  const float bias[6] = {0, 0, 0, 0, 0, 0};
  EXPECT_EQ(top_p_selection(score, bias, 6, 4, 1.0f), (std::vector<int64_t>{0, 2, 4, 5}));
  EXPECT_EQ(top_p_selection(score, bias, 6, 4, 0.45f), (std::vector<int64_t>{0}));
  EXPECT_EQ(top_p_selection(score, bias, 6, 4, 0.5f), (std::vector<int64_t>{0, 2}))
      << "the expert crossing P is kept";
  EXPECT_EQ(top_p_selection(score, bias, 6, 4, 0.84f), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(top_p_selection(score, bias, 6, 4, 0.86f), (std::vector<int64_t>{0, 2, 4}));
  EXPECT_EQ(top_p_selection(score, bias, 6, 4, 0.96f), (std::vector<int64_t>{0, 2, 4, 5}));
  EXPECT_EQ(top_p_selection(score, bias, 6, 4, 0.01f), (std::vector<int64_t>{0})) << "at least one";
  // The bias picks the set; the raw score orders it for top-p.
  const float bias2[6] = {0, 0, 0, 0, 1.0f, 0};
  EXPECT_EQ(top_p_selection(score, bias2, 6, 2, 1.0f), (std::vector<int64_t>{4, 0}));
  EXPECT_EQ(top_p_selection(score, bias2, 6, 2, 0.5f), (std::vector<int64_t>{0}));
}

TEST(ExpertTopP, OneIsTodayAndLowerPrunes) {
  EngineOptions base;
  base.speculation = SpeculationMode::kOff;
  const Pass today = run(base, kPrompt, 4);
  const Pass one = run(base, kPrompt, 4, /*piece_top_p=*/1.0f);
  ASSERT_FALSE(today.logits.empty());
  ASSERT_EQ(today.logits.size(), one.logits.size());
  EXPECT_EQ(
      std::memcmp(today.logits.data(), one.logits.data(), today.logits.size() * sizeof(float)), 0);
  EXPECT_EQ(one.times.experts_pruned, 0u);
  EngineOptions half = base;
  half.expert_top_p = 0.5f;
  const Pass pruned = run(half, kPrompt, 4);
  ASSERT_EQ(pruned.logits.size(), today.logits.size());
  EXPECT_NE(
      std::memcmp(today.logits.data(), pruned.logits.data(), today.logits.size() * sizeof(float)),
      0);
  EXPECT_GT(pruned.times.experts_pruned, 0u);
  EXPECT_LT(pruned.experts.requests, today.experts.requests) << "fewer experts asked for";
  // A piece's own P overrides the engine's: 1.0 on a P = 0.5 engine is today.
  const Pass back = run(half, kPrompt, 4, 1.0f);
  EXPECT_EQ(
      std::memcmp(today.logits.data(), back.logits.data(), today.logits.size() * sizeof(float)), 0);
  EngineOptions bad = base;
  bad.expert_top_p = 0.0f;
  EXPECT_FALSE(Model::load(testing::tiny_model_dir(), {}, bad).ok());
  bad.expert_top_p = 1.5f;
  EXPECT_FALSE(Model::load(testing::tiny_model_dir(), {}, bad).ok());
}

TEST(ExpertTopP, SessionsAreKeyedOnP) {
  auto m = Model::load(testing::tiny_model_dir(), {}, EngineOptions{});
  ASSERT_TRUE(m.ok()) << m.status();
  SessionPool pool(**m, 1);
  const std::vector<int32_t> a = {1, 2, 3};
  auto p1 = pool.acquire(a, -1, nullptr, 1.0f);
  ASSERT_TRUE(p1.ok());
  Session& s = pool.at(p1->session);
  s.tokens = a;  // as if prefilled
  s.logits.assign(static_cast<size_t>((*m)->config().vocab_size), 0.0f);
  pool.release(p1->session, true);
  const std::vector<int32_t> longer = {1, 2, 3, 4};
  auto p2 = pool.acquire(longer, -1, nullptr, 0.5f);
  ASSERT_TRUE(p2.ok());
  EXPECT_EQ(p2->reused, 0) << "a state computed under P = 1 was reused under P = 0.5";
  Session& s2 = pool.at(p2->session);
  s2.tokens = longer;
  s2.logits.assign(static_cast<size_t>((*m)->config().vocab_size), 0.0f);
  pool.release(p2->session, true);
  auto p3 = pool.acquire({1, 2, 3, 4, 5}, -1, nullptr, 0.5f);
  ASSERT_TRUE(p3.ok());
  EXPECT_EQ(p3->reused, 4) << "the same P reuses";
}

TEST(ExpertTopP, CheckpointsAreKeyedOnP) {
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  ASSERT_TRUE(c.ok());
  auto store = CheckpointStore::open({uint64_t{1} << 30, ""}, *c, 42, 4);
  ASSERT_TRUE(store.ok()) << store.status();
  SequenceState st(*c);
  const std::vector<float> logits(static_cast<size_t>(c->vocab_size), 0.0f);
  const std::vector<int32_t> t = {1, 2, 3, 4};
  ASSERT_TRUE((*store)->save(t, 3, st, logits, 0.5f).ok());
  EXPECT_TRUE((*store)->has(t, 3, 0.5f));
  EXPECT_FALSE((*store)->has(t, 3, 1.0f));
  EXPECT_EQ((*store)->restore_deepest(t, 0, 1.0f).tokens, 0);
  EXPECT_EQ((*store)->restore_deepest(t, 0, 0.5f).tokens, 3);
}

}  // namespace
}  // namespace k3::engined
