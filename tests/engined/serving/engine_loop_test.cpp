// engined's serving side on the tiny model, in process: sessions continue a
// prompt that extends what they processed, checkpoints restore a divergent
// one, cancellation frees the session, and every path generates exactly what
// a fresh run generates.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "engined/serving/engine_loop.h"
#include "tests/engined/serving/loop_util.h"
#include "tests/test_util.h"

namespace k3::engined {
namespace {

namespace fs = std::filesystem;

struct Outcome {
  ServeEvent started;
  std::vector<int32_t> tokens;
  ServeEvent end;  // kFinished or kFailed
};

using testing::make_loop;

ServeRequest greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
  ServeRequest r;
  r.request_id = "test";
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  return r;
}

// Collects a request's events; `cancel_after` tokens (or at start when 0 and
// `cancel_at_start`) cancels it.
Outcome run(EngineLoop& loop, ServeRequest r, int cancel_after = -1, bool cancel_at_start = false) {
  auto h = loop.submit(std::move(r));
  EXPECT_TRUE(h.ok()) << h.status();
  Outcome o;
  ServeEvent e;
  for (;;) {
    if (!(*h)->next(&e, 60000)) {
      ADD_FAILURE() << "no event within 60 s";
      return o;
    }
    if (e.kind == ServeEvent::Kind::kStarted) {
      o.started = e;
      if (cancel_at_start) (*h)->cancel();
    } else if (e.kind == ServeEvent::Kind::kToken) {
      o.tokens.push_back(e.token);
      if (cancel_after >= 0 && static_cast<int>(o.tokens.size()) == cancel_after) (*h)->cancel();
    } else if (e.kind == ServeEvent::Kind::kProgress) {
      continue;  // engine_loop_prefill_test.cpp
    } else {
      o.end = e;
      return o;
    }
  }
}

std::vector<int32_t> ramp(int n, int start = 5) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(start + (i * 37) % 3000);
  return v;
}

TEST(Serving, ContinuesASessionAndPrefillsOnlyTheNewTokens) {
  auto loop = make_loop(2);
  const auto p = ramp(40);
  Outcome a = run(*loop, greedy(p, 6));
  ASSERT_EQ(a.end.kind, ServeEvent::Kind::kFinished) << a.end.status;
  ASSERT_EQ(a.tokens.size(), 6u);
  EXPECT_EQ(a.started.plan.reused, 0);
  EXPECT_EQ(a.started.prefill_tokens, 40);

  // Next turn: the prompt, the reply, then new tokens. The session processed
  // the prompt and all but the last reply token (sampled, never run).
  auto next = p;
  next.insert(next.end(), a.tokens.begin(), a.tokens.end());
  const auto extra = ramp(9, 100);
  next.insert(next.end(), extra.begin(), extra.end());
  const uint64_t prefilled_before = loop->counters().prefill_tokens;
  Outcome b = run(*loop, greedy(next, 5));
  ASSERT_EQ(b.end.kind, ServeEvent::Kind::kFinished) << b.end.status;
  EXPECT_EQ(b.started.plan.reused, 40 + 6 - 1);
  EXPECT_EQ(b.started.prefill_tokens, static_cast<int64_t>(next.size()) - (40 + 6 - 1));
  EXPECT_EQ(loop->counters().prefill_tokens - prefilled_before, 1u + 9u);
  EXPECT_EQ(loop->counters().reused_tokens, 45u);

  // Exactly what a fresh engine generates for the whole prompt.
  auto fresh = make_loop(1);
  Outcome c = run(*fresh, greedy(next, 5));
  EXPECT_EQ(c.started.plan.reused, 0);
  EXPECT_EQ(b.tokens, c.tokens);
}

TEST(Serving, IdenticalPromptUsesTheSavedLogits) {
  auto loop = make_loop(1);
  const auto p = ramp(20);
  Outcome a = run(*loop, greedy(p, 0));  // prefill only
  ASSERT_EQ(a.end.kind, ServeEvent::Kind::kFinished);
  Outcome b = run(*loop, greedy(p, 4));
  EXPECT_EQ(b.started.plan.reused, 20);
  EXPECT_EQ(b.started.prefill_tokens, 0);
  auto fresh = make_loop(1);
  EXPECT_EQ(run(*fresh, greedy(p, 4)).tokens, b.tokens);
}

void divergent_edit_restores_a_checkpoint(const std::string& dir) {
  auto loop = make_loop(1, 64u << 20, dir);
  // Turn 1 with a turn boundary at 24 (and the prompt end, 40).
  auto p = ramp(40);
  ServeRequest r = greedy(p, 5);
  r.checkpoint_positions = {24};
  Outcome a = run(*loop, r);
  ASSERT_EQ(a.end.kind, ServeEvent::Kind::kFinished) << a.end.status;
  EXPECT_EQ(loop->counters().checkpoints_saved, 2u);

  // An edit after the boundary: the session's tokens are not a prefix any
  // more; the checkpoint at 24 is the deepest one that is.
  auto edited = p;
  edited.resize(30);
  edited.push_back(7);
  Outcome b = run(*loop, greedy(edited, 5));
  ASSERT_EQ(b.end.kind, ServeEvent::Kind::kFinished) << b.end.status;
  EXPECT_EQ(b.started.plan.restored, 24);
  EXPECT_EQ(b.started.plan.reused, 0);
  EXPECT_EQ(b.started.prefill_tokens, 31 - 24);
  EXPECT_EQ(loop->counters().checkpoint_restores, 1u);

  auto fresh = make_loop(1);
  EXPECT_EQ(run(*fresh, greedy(edited, 5)).tokens, b.tokens);

  // Back to the first prompt plus a new turn: the end-of-prompt checkpoint.
  auto turn2 = p;
  turn2.push_back(11);
  turn2.push_back(12);
  Outcome c = run(*loop, greedy(turn2, 3));
  EXPECT_EQ(c.started.plan.restored, 40);
  EXPECT_EQ(run(*fresh, greedy(turn2, 3)).tokens, c.tokens);
}

// --sessions is a limit that evicts: a third conversation over two sessions
// takes the least recently used one (counted); the other keeps its state.
TEST(Serving, ASessionLimitEvictsTheLeastRecentlyUsedConversation) {
  auto loop = make_loop(2);
  const auto a = ramp(20, 5), b = ramp(20, 100), c = ramp(20, 200);
  for (const auto& p : {a, b})
    ASSERT_EQ(run(*loop, greedy(p, 0)).end.kind, ServeEvent::Kind::kFinished);
  EXPECT_EQ(loop->counters().session_evictions, 0u);
  ASSERT_EQ(run(*loop, greedy(c, 0)).end.kind, ServeEvent::Kind::kFinished);
  EXPECT_EQ(loop->counters().session_evictions, 1u);
  auto b2 = b;
  b2.push_back(7);
  EXPECT_EQ(run(*loop, greedy(b2, 1)).started.plan.reused, 20) << "b was not the oldest";
  auto a2 = a;
  a2.push_back(7);
  EXPECT_EQ(run(*loop, greedy(a2, 1)).started.plan.reused, 0) << "a was evicted";
  EXPECT_EQ(loop->counters().session_evictions, 2u);
}

// --checkpoint-mb evicts the least recently used checkpoints to stay within
// the budget (counted; the bytes held never exceed it).
TEST(Serving, ACheckpointBudgetEvictsTheOldestFirst) {
  uint64_t one = 0;
  {
    auto probe = make_loop(1, 64u << 20);
    ASSERT_EQ(run(*probe, greedy(ramp(20, 5), 0)).end.kind, ServeEvent::Kind::kFinished);
    one = probe->counters().checkpoint_bytes;
    ASSERT_GT(one, 0u);
  }
  const uint64_t budget = 2 * one + one / 2;
  auto loop = make_loop(1, budget);
  EXPECT_EQ(loop->counters().checkpoint_budget_bytes, budget);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 4; ++i) prompts.push_back(ramp(20, 5 + 300 * i));
  for (const auto& p : prompts) {
    ASSERT_EQ(run(*loop, greedy(p, 0)).end.kind, ServeEvent::Kind::kFinished);
    EXPECT_LE(loop->counters().checkpoint_bytes, budget);
  }
  EXPECT_EQ(loop->counters().checkpoints_saved, 4u);
  EXPECT_EQ(loop->counters().checkpoint_evictions, 2u);
  // The oldest is gone: its continuation restores nothing.
  auto first = prompts[0];
  first.push_back(9);
  EXPECT_EQ(run(*loop, greedy(first, 1)).started.plan.restored, 0);
  EXPECT_LE(loop->counters().checkpoint_bytes, budget);
}

TEST(Serving, DivergentEditRestoresACheckpointInRam) {
  divergent_edit_restores_a_checkpoint("");
}

TEST(Serving, DivergentEditRestoresACheckpointOnDisk) {
  testing::TempDir tmp;
  divergent_edit_restores_a_checkpoint(tmp.file("ckpt"));
}

TEST(Serving, CorruptCheckpointFileIsDroppedNotUsed) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("ckpt");
  auto loop = make_loop(1, 64u << 20, dir);
  auto p = ramp(30);
  ServeRequest r = greedy(p, 3);
  r.checkpoint_positions = {16};
  ASSERT_EQ(run(*loop, r).end.kind, ServeEvent::Kind::kFinished);
  // The loop hands its saves (the snapshot at 16, the turn's end) to a disk
  // queue: wait until both files are written (CI once counted 1).
  std::vector<fs::path> files;
  for (int i = 0; i < 300 && files.size() < 2; ++i) {
    if (i > 0) std::this_thread::sleep_for(std::chrono::milliseconds(100));
    loop->wait_checkpoint_writes();
    files.clear();
    for (const auto& f : fs::directory_iterator(dir))
      if (f.path().filename().string().find(".tmp.") == std::string::npos)
        files.push_back(f.path());
  }
  int corrupted = 0;
  for (const fs::path& f : files) {
    std::fstream s(f, std::ios::in | std::ios::out | std::ios::binary);
    s.seekp(0);
    s.write("XXXX", 4);
    ++corrupted;
  }
  EXPECT_EQ(corrupted, 2);
  auto edited = p;
  edited.resize(20);
  Outcome b = run(*loop, greedy(edited, 4));
  ASSERT_EQ(b.end.kind, ServeEvent::Kind::kFinished) << b.end.status;
  EXPECT_EQ(b.started.plan.restored, 0);  // refused, prefilled from 0
  auto fresh = make_loop(1);
  EXPECT_EQ(run(*fresh, greedy(edited, 4)).tokens, b.tokens);
}

TEST(Serving, CancelMidPrefillDropsTheStateAndFreesTheSession) {
  auto loop = make_loop(1);
  const auto p = ramp(3000);
  Outcome a = run(*loop, greedy(p, 5), -1, /*cancel_at_start=*/true);
  ASSERT_EQ(a.end.kind, ServeEvent::Kind::kFailed);
  EXPECT_EQ(a.end.status.code(), absl::StatusCode::kCancelled) << a.end.status;
  EXPECT_TRUE(a.tokens.empty());
  EXPECT_LT(loop->counters().prefill_tokens, 3000u);
  EXPECT_EQ(loop->counters().cancelled, 1u);
  EXPECT_EQ(loop->counters().sessions_busy, 0u);
  // The one session is free, and its partial state is gone (no reuse).
  Outcome b = run(*loop, greedy(p, 2));
  ASSERT_EQ(b.end.kind, ServeEvent::Kind::kFinished) << b.end.status;
  EXPECT_EQ(b.started.plan.reused, 0);
}

TEST(Serving, CancelMidDecodeStopsBetweenTokens) {
  auto loop = make_loop(1);
  Outcome a = run(*loop, greedy(ramp(10), 100000), /*cancel_after=*/3);
  ASSERT_EQ(a.end.kind, ServeEvent::Kind::kFailed);
  EXPECT_EQ(a.end.status.code(), absl::StatusCode::kCancelled);
  EXPECT_GE(a.tokens.size(), 3u);
  EXPECT_LT(a.tokens.size(), 100u);
  EXPECT_EQ(loop->counters().sessions_busy, 0u);
  EXPECT_EQ(run(*loop, greedy(ramp(10), 2)).end.kind, ServeEvent::Kind::kFinished);
}

TEST(Serving, SessionsInterleaveTheirSteps) {
  auto loop = make_loop(2);
  auto h1 = loop->submit(greedy(ramp(12), 40));
  auto h2 = loop->submit(greedy(ramp(12, 900), 40));
  ASSERT_TRUE(h1.ok() && h2.ok());
  // Both get tokens before either finishes.
  int tokens1 = 0, tokens2_at_end1 = -1, tokens2 = 0;
  bool done1 = false, done2 = false;
  ServeEvent e;
  while (!(done1 && done2)) {
    if (!done1 && (*h1)->next(&e, 10)) {
      if (e.kind == ServeEvent::Kind::kToken) ++tokens1;
      if (e.kind == ServeEvent::Kind::kFinished) {
        done1 = true;
        tokens2_at_end1 = tokens2;
      }
      ASSERT_NE(e.kind, ServeEvent::Kind::kFailed);
    }
    if (!done2 && (*h2)->next(&e, 10)) {
      if (e.kind == ServeEvent::Kind::kToken) ++tokens2;
      if (e.kind == ServeEvent::Kind::kFinished) done2 = true;
      ASSERT_NE(e.kind, ServeEvent::Kind::kFailed);
    }
  }
  EXPECT_EQ(tokens1, 40);
  EXPECT_EQ(tokens2, 40);
  EXPECT_GT(tokens2_at_end1, 20);
}

// Continuous batching: requests running together (prefill pieces and decode
// tokens of different sessions in one pass) generate exactly what each
// generates alone, and the union of their routed experts is fetched once.
TEST(Serving, BatchedRequestsMatchRunningAlone) {
  const std::vector<std::vector<int32_t>> prompts = {ramp(7), ramp(40, 300), ramp(19, 1200)};
  std::vector<std::vector<int32_t>> alone;
  uint64_t alone_expert_requests = 0;
  for (const auto& p : prompts) {
    auto loop = make_loop(1);
    alone.push_back(run(*loop, greedy(p, 12)).tokens);
    alone_expert_requests += loop->counters().experts.requests;
  }
  auto loop = make_loop(3);
  std::vector<std::shared_ptr<RequestHandle>> hs;
  for (const auto& p : prompts) {
    auto h = loop->submit(greedy(p, 12));
    ASSERT_TRUE(h.ok());
    hs.push_back(*h);
  }
  for (size_t i = 0; i < hs.size(); ++i) {
    std::vector<int32_t> tokens;
    ServeEvent e;
    while (hs[i]->next(&e, 60000)) {
      if (e.kind == ServeEvent::Kind::kToken) tokens.push_back(e.token);
      if (e.kind == ServeEvent::Kind::kFinished || e.kind == ServeEvent::Kind::kFailed) break;
    }
    ASSERT_EQ(e.kind, ServeEvent::Kind::kFinished) << e.status;
    EXPECT_EQ(tokens, alone[i]) << "request " << i;
  }
  EXPECT_LT(loop->counters().experts.requests, alone_expert_requests);
}

TEST(Serving, RefusesBadRequests) {
  auto loop = make_loop(1);
  EXPECT_EQ(loop->submit(greedy({}, 3)).status().code(), absl::StatusCode::kInvalidArgument);
  auto bad = loop->submit(greedy({1, 999999}, 3));
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("999999"), std::string::npos);
  EXPECT_EQ(loop->submit(greedy({1, 2}, -1)).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace k3::engined
