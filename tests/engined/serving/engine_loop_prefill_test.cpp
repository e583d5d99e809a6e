// A prompt's reading in engined's serving loop on the tiny model: kProgress
// events (one before the first piece, one per piece computed, totals after
// reuse), the estimated time left from the measured prefill rate, a cancel
// during prefill that stops within one piece, and prompt tokens that add up
// (computed + continued + restored = the prompt).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "engined/serving/engine_loop.h"
#include "tests/engined/serving/loop_util.h"
#include "tests/test_util.h"

namespace k3::engined {
namespace {

using testing::make_loop;

constexpr int64_t kChunk = 16;  // make_loop's prefill chunk

std::vector<int32_t> ramp(int n, int start = 5) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(start + (i * 37) % 3000);
  return v;
}

ServeRequest greedy(std::vector<int32_t> prompt, int64_t max_tokens, int n = 1) {
  ServeRequest r;
  r.request_id = "prefill";
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.n = n;
  if (n > 1) r.sampling.temperature = 1.0f;
  return r;
}

// Every event of a request, in order, until its `n` choices finished or it
// failed.
std::vector<ServeEvent> events(EngineLoop& loop, ServeRequest r) {
  const int n = r.n;
  auto h = loop.submit(std::move(r));
  EXPECT_TRUE(h.ok()) << h.status();
  std::vector<ServeEvent> out;
  if (!h.ok()) return out;
  int finished = 0;
  ServeEvent e;
  while (finished < n) {
    if (!(*h)->next(&e, 60000)) {
      ADD_FAILURE() << "no event within 60 s";
      return out;
    }
    out.push_back(e);
    if (e.kind == ServeEvent::Kind::kFailed) return out;
    if (e.kind == ServeEvent::Kind::kFinished) ++finished;
  }
  return out;
}

std::vector<ServeEvent> progress_of(const std::vector<ServeEvent>& ev) {
  std::vector<ServeEvent> p;
  for (const ServeEvent& e : ev)
    if (e.kind == ServeEvent::Kind::kProgress) p.push_back(e);
  return p;
}

// The request ran to the end with kStarted first, then its progress: all of
// it before the first token, done = `dones` in order, total = kStarted's
// prefill_tokens throughout.
void expect_progress(const std::vector<ServeEvent>& ev, const std::vector<int64_t>& dones) {
  ASSERT_FALSE(ev.empty());
  ASSERT_EQ(ev.front().kind, ServeEvent::Kind::kStarted);
  ASSERT_EQ(ev.back().kind, ServeEvent::Kind::kFinished) << ev.back().status;
  const int64_t total = ev.front().prefill_tokens;
  size_t i = 1;
  std::vector<int64_t> seen;
  for (; i < ev.size() && ev[i].kind == ServeEvent::Kind::kProgress; ++i) {
    EXPECT_EQ(ev[i].total, total) << "event " << i;
    seen.push_back(ev[i].done);
  }
  EXPECT_EQ(seen, dones);
  // Nothing of the prompt's reading after it: tokens and the ends.
  for (; i < ev.size(); ++i) EXPECT_NE(ev[i].kind, ServeEvent::Kind::kProgress) << "event " << i;
}

// 0, then one per piece of up to kChunk tokens, up to `total`.
std::vector<int64_t> pieces_of(int64_t total) {
  std::vector<int64_t> d = {0};
  for (int64_t done = 0; done < total;) d.push_back(done = std::min(total, done + kChunk));
  return d;
}

TEST(Progress, OneBeforeTheFirstPieceThenOnePerPiece) {
  auto loop = make_loop(1);
  const std::vector<ServeEvent> ev = events(*loop, greedy(ramp(100), 3));
  ASSERT_EQ(ev.front().prefill_tokens, 100);
  const std::vector<int64_t> dones = pieces_of(100);
  ASSERT_EQ(dones.size(), (100 + kChunk - 1) / kChunk + 1);  // ceil(total / chunk) + 1
  expect_progress(ev, dones);
  EXPECT_EQ(loop->counters().prefill_tokens, 100u);
}

TEST(Progress, CountsOnlyThePromptTokensLeftToCompute) {
  auto loop = make_loop(1, 64u << 20);
  // Turn 1, with a turn boundary at 24: the piece is cut there, and
  // progress follows the pieces as they ran.
  const auto p = ramp(40);
  ServeRequest r = greedy(p, 4);
  r.checkpoint_positions = {24};
  const std::vector<ServeEvent> a = events(*loop, r);
  expect_progress(a, {0, 16, 24, 40});

  // Turn 2 continues the session: only the new tokens are read.
  auto next = p;
  for (const ServeEvent& e : a)
    if (e.kind == ServeEvent::Kind::kToken) next.push_back(e.token);
  const auto extra = ramp(20, 100);
  next.insert(next.end(), extra.begin(), extra.end());
  const std::vector<ServeEvent> b = events(*loop, greedy(next, 2));
  ASSERT_EQ(b.front().plan.reused, 40 + 4 - 1);
  ASSERT_EQ(b.front().prefill_tokens, 1 + 20);
  expect_progress(b, {0, 16, 21});

  // An edit after the boundary restores the checkpoint at 24.
  auto edited = p;
  edited.resize(30);
  const std::vector<ServeEvent> c = events(*loop, greedy(edited, 2));
  ASSERT_EQ(c.front().plan.restored, 24);
  expect_progress(c, {0, 6});
}

TEST(Progress, NoneWhenThePromptIsFullyReused) {
  auto loop = make_loop(1);
  const auto p = ramp(20);
  expect_progress(events(*loop, greedy(p, 0)), {0, 16, 20});
  const std::vector<ServeEvent> again = events(*loop, greedy(p, 3));
  ASSERT_EQ(again.front().kind, ServeEvent::Kind::kStarted);
  EXPECT_EQ(again.front().prefill_tokens, 0);
  EXPECT_TRUE(progress_of(again).empty());
  EXPECT_EQ(again.back().kind, ServeEvent::Kind::kFinished) << again.back().status;
}

TEST(Progress, ChoicesReadThePromptOnce) {
  auto loop = make_loop(2);
  const std::vector<ServeEvent> ev = events(*loop, greedy(ramp(40), 3, /*n=*/2));
  expect_progress(ev, pieces_of(40));
  EXPECT_EQ(
      std::count_if(ev.begin(), ev.end(),
                    [](const ServeEvent& e) { return e.kind == ServeEvent::Kind::kFinished; }),
      2);
  EXPECT_EQ(loop->counters().prefill_tokens, 40u);
}

// eta_s: negative before engined measured any prefill, then the time left at
// the measured rate (positive while tokens are left, 0 at the end); the rate
// is the engine's, so the next request's first estimate already has it.
TEST(Progress, EtaComesFromTheEnginesMeasuredPrefillRate) {
  auto loop = make_loop(2);
  EXPECT_EQ(loop->counters().prefill_tokens_per_second, 0.0);
  const std::vector<ServeEvent> first = progress_of(events(*loop, greedy(ramp(100), 1)));
  ASSERT_EQ(first.size(), pieces_of(100).size());
  EXPECT_LT(first.front().eta_s, 0) << "no rate measured yet";
  for (size_t i = 1; i + 1 < first.size(); ++i)
    EXPECT_GT(first[i].eta_s, 0) << "progress " << i << " done " << first[i].done;
  EXPECT_EQ(first.back().eta_s, 0.0);
  const double rate = loop->counters().prefill_tokens_per_second;
  EXPECT_GT(rate, 0);

  const std::vector<ServeEvent> second = progress_of(events(*loop, greedy(ramp(100, 900), 1)));
  ASSERT_FALSE(second.empty());
  EXPECT_EQ(second.front().done, 0);
  EXPECT_GT(second.front().eta_s, 0) << "the rate survives across requests";
  EXPECT_GT(loop->counters().prefill_tokens_per_second, 0);
}

// Reads a prefilling request's progress up to the cancel (the first
// progress, then whatever already came); returns the last done seen.
int64_t cancel_after_first_progress(RequestHandle& h) {
  ServeEvent e;
  EXPECT_TRUE(h.next(&e, 60000));
  EXPECT_EQ(e.kind, ServeEvent::Kind::kStarted);
  EXPECT_TRUE(h.next(&e, 60000));
  EXPECT_EQ(e.kind, ServeEvent::Kind::kProgress);
  EXPECT_EQ(e.done, 0);
  int64_t done = 0;
  while (h.next(&e, 0)) {
    EXPECT_EQ(e.kind, ServeEvent::Kind::kProgress);
    done = e.done;
  }
  h.cancel();
  return done;
}

// A caller that hangs up during prefill: the loop stops within one piece of
// the cancel, which engined's prefill-token counter shows.
TEST(Progress, CancelDuringPrefillStopsWithinOnePiece) {
  auto loop = make_loop(1);
  const int64_t n = 3000;
  auto h = loop->submit(greedy(ramp(static_cast<int>(n)), 5));
  ASSERT_TRUE(h.ok()) << h.status();
  // The last done seen before the cancel is what the loop had computed when
  // asked to stop, give or take the piece that ends between the two (here
  // the request runs alone: the piece in flight stops between layers).
  const int64_t done_at_cancel = cancel_after_first_progress(**h);
  ServeEvent e;
  int64_t last_done = done_at_cancel;
  for (;;) {
    ASSERT_TRUE((*h)->next(&e, 60000));
    if (e.kind != ServeEvent::Kind::kProgress) break;
    last_done = e.done;
  }
  ASSERT_EQ(e.kind, ServeEvent::Kind::kFailed);
  EXPECT_EQ(e.status.code(), absl::StatusCode::kCancelled) << e.status;
  const EngineCounters c = loop->counters();
  EXPECT_LE(c.prefill_tokens, static_cast<uint64_t>(done_at_cancel + kChunk));
  EXPECT_LT(c.prefill_tokens, static_cast<uint64_t>(n));
  // Every piece computed was reported.
  EXPECT_EQ(c.prefill_tokens, static_cast<uint64_t>(last_done));
  EXPECT_EQ(c.cancelled, 1u);
  EXPECT_EQ(c.sessions_busy, 0u);
}

// Beside another request the pass is not stopped between layers: the piece
// in flight completes, and the next step drops the request.
TEST(Progress, CancelDuringABatchedPrefillStopsAfterThePieceInFlight) {
  auto loop = make_loop(2);
  auto decoding = loop->submit(greedy(ramp(5), 1 << 20));
  ASSERT_TRUE(decoding.ok()) << decoding.status();
  ServeEvent e;
  do {
    ASSERT_TRUE((*decoding)->next(&e, 60000));
  } while (e.kind != ServeEvent::Kind::kToken);
  const uint64_t before = loop->counters().prefill_tokens;

  const int64_t n = 3000;
  auto h = loop->submit(greedy(ramp(static_cast<int>(n), 900), 5));
  ASSERT_TRUE(h.ok()) << h.status();
  const int64_t done_at_cancel = cancel_after_first_progress(**h);
  int64_t last_done = done_at_cancel;
  for (;;) {
    ASSERT_TRUE((*h)->next(&e, 60000));
    if (e.kind != ServeEvent::Kind::kProgress) break;
    last_done = e.done;
  }
  ASSERT_EQ(e.kind, ServeEvent::Kind::kFailed);
  EXPECT_EQ(e.status.code(), absl::StatusCode::kCancelled) << e.status;
  const uint64_t prefilled = loop->counters().prefill_tokens - before;
  EXPECT_LE(prefilled, static_cast<uint64_t>(done_at_cancel + kChunk));
  EXPECT_EQ(prefilled, static_cast<uint64_t>(last_done));
  (*decoding)->cancel();
  while ((*decoding)->next(&e, 60000) && e.kind == ServeEvent::Kind::kToken) {
  }
  EXPECT_EQ(e.kind, ServeEvent::Kind::kFailed);
  EXPECT_EQ(loop->counters().prefill_tokens - before, prefilled);
}

// The usage engined reports adds up: each prompt token is computed, continued
// from a session or restored from a checkpoint, once (kStarted's split; the
// counters' sums), so the gateway's cached tokens (continued + restored) are
// exactly the prompt tokens not computed again.
TEST(Usage, PromptTokensAreComputedContinuedOrRestored) {
  auto loop = make_loop(1, 64u << 20);
  const auto p = ramp(40);
  ServeRequest r = greedy(p, 3);
  r.checkpoint_positions = {24};
  std::vector<std::vector<int32_t>> prompts = {p};
  std::vector<ServeEvent> a = events(*loop, r);
  auto next = p;
  for (const ServeEvent& e : a)
    if (e.kind == ServeEvent::Kind::kToken) next.push_back(e.token);
  next.push_back(9);
  prompts.push_back(next);  // continues the session
  auto edited = p;
  edited.resize(31);
  prompts.push_back(edited);  // restores the checkpoint at 24
  prompts.push_back(edited);  // restores its own end: nothing computed
  int64_t computed = 40, continued = 0, restored = 0, total = 40;
  for (size_t i = 1; i < prompts.size(); ++i) {
    const std::vector<ServeEvent> ev = events(*loop, greedy(prompts[i], 2));
    ASSERT_EQ(ev.back().kind, ServeEvent::Kind::kFinished) << ev.back().status;
    const ServeEvent& s = ev.front();
    EXPECT_EQ(s.prefill_tokens + s.plan.reused + s.plan.restored,
              static_cast<int64_t>(prompts[i].size()))
        << "prompt " << i;
    EXPECT_EQ(ev.back().prompt_tokens, static_cast<int64_t>(prompts[i].size()));
    computed += s.prefill_tokens;
    continued += s.plan.reused;
    restored += s.plan.restored;
    total += static_cast<int64_t>(prompts[i].size());
  }
  EXPECT_GT(continued, 0);
  EXPECT_EQ(restored, 24 + 31);
  const EngineCounters c = loop->counters();
  EXPECT_EQ(c.prompt_tokens, static_cast<uint64_t>(total));
  EXPECT_EQ(c.prefill_tokens, static_cast<uint64_t>(computed));
  EXPECT_EQ(c.reused_tokens, static_cast<uint64_t>(continued));
  EXPECT_EQ(c.restored_tokens, static_cast<uint64_t>(restored));
  EXPECT_EQ(c.prompt_tokens, c.prefill_tokens + c.reused_tokens + c.restored_tokens);
}

}  // namespace
}  // namespace k3::engined
