// Prefill snapshots (engined --snapshot-tokens) on the tiny model, in
// process: a prompt read once leaves a snapshot every N tokens; a later
// prompt that shares a prefix resumes from the deepest one, from RAM or from
// its file after a restart, with log-probabilities bit-identical to a fresh
// engine reading the whole prompt; a flipped byte is refused and the prompt
// recomputed; a cancelled prefill keeps the snapshots it made.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "engined/serving/engine_loop.h"
#include "engined/serving/snapshot_file.h"
#include "shared/api/request_limits.h"
#include "tests/engined/serving/loop_util.h"
#include "tests/test_util.h"

namespace k3::engined {
namespace {

namespace fs = std::filesystem;

constexpr int64_t kEvery = 8;  // --snapshot-tokens

struct Outcome {
  ServeEvent started;
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;
  ServeEvent end;
};

// Both tiers: RAM (64 MB) and `dir` (when given), snapshots every kEvery.
std::unique_ptr<EngineLoop> snapshot_loop(const std::string& dir, uint64_t ram = 64u << 20) {
  EngineOptions o;
  o.chunk = 16;
  auto model = Model::load(testing::tiny_model_dir(), {}, o);
  EXPECT_TRUE(model.ok()) << model.status();
  EngineLoopOptions lo;
  lo.sessions = 1;
  lo.chunk_policy = false;  // pieces of o.chunk
  lo.checkpoints.budget_bytes = ram;
  lo.checkpoints.dir = dir;
  lo.checkpoints.disk_budget_bytes = dir.empty() ? 0 : 1ull << 30;
  lo.snapshot_tokens = kEvery;
  auto loop = EngineLoop::create(std::move(*model), lo);
  EXPECT_TRUE(loop.ok()) << loop.status();
  return std::move(*loop);
}

// Greedy, with every token's 20 most likely log-probabilities: equal floats
// mean equal logits.
Outcome run(EngineLoop& loop, std::vector<int32_t> prompt, int64_t max_tokens = 4) {
  ServeRequest r;
  r.request_id = "snap";
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.logprobs = true;
  r.top_logprobs = api::kMaxTopLogprobs;
  auto h = loop.submit(std::move(r));
  EXPECT_TRUE(h.ok()) << h.status();
  Outcome o;
  ServeEvent e;
  for (;;) {
    if (!(*h)->next(&e, 120000)) {
      ADD_FAILURE() << "no event within 120 s";
      return o;
    }
    if (e.kind == ServeEvent::Kind::kStarted) {
      o.started = e;
    } else if (e.kind == ServeEvent::Kind::kToken) {
      o.tokens.push_back(e.token);
      o.logprobs.push_back(*e.logprobs);
    } else if (e.kind == ServeEvent::Kind::kProgress) {
      continue;  // engine_loop_prefill_test.cpp
    } else {
      o.end = e;
      return o;
    }
  }
}

void expect_identical(const Outcome& a, const Outcome& b) {
  ASSERT_EQ(a.end.kind, ServeEvent::Kind::kFinished) << a.end.status;
  ASSERT_EQ(b.end.kind, ServeEvent::Kind::kFinished) << b.end.status;
  ASSERT_EQ(a.tokens, b.tokens);
  ASSERT_EQ(a.logprobs.size(), b.logprobs.size());
  for (size_t i = 0; i < a.logprobs.size(); ++i) {
    EXPECT_EQ(a.logprobs[i].chosen, b.logprobs[i].chosen) << "token " << i;
    EXPECT_EQ(a.logprobs[i].top, b.logprobs[i].top) << "token " << i;
  }
}

std::vector<int32_t> ramp(int n, int start = 5) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(start + (i * 37) % 3000);
  return v;
}

std::vector<int32_t> edit_at(const std::vector<int32_t>& p, size_t keep,
                             std::vector<int32_t> tail) {
  std::vector<int32_t> v(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(keep));
  v.insert(v.end(), tail.begin(), tail.end());
  return v;
}

std::string file_of(const std::string& dir, const std::vector<int32_t>& p, size_t n) {
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  auto m = Model::load(testing::tiny_model_dir(), {}, EngineOptions{});
  const SnapshotIdentity id{(*m)->fingerprint(), (*m)->options().quant.dense_bits, 1.0f};
  const std::vector<int32_t> t(p.begin(), p.begin() + static_cast<std::ptrdiff_t>(n));
  return (fs::path(dir) / snapshot_file_name(id, t)).string();
}

TEST(Snapshots, AnyPrefixIsReadOnceExactlyAcrossRestartsAndRefusedWhenCorrupt) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("ckpt");
  auto fresh = testing::make_loop(1);  // no checkpoints, no snapshots
  const auto p = ramp(40);             // five intervals of 8
  {
    auto loop = snapshot_loop(dir);
    Outcome first = run(*loop, p, 1);
    ASSERT_EQ(first.end.kind, ServeEvent::Kind::kFinished) << first.end.status;
    EXPECT_EQ(loop->counters().snapshots_saved, 4u);    // 8, 16, 24, 32
    EXPECT_EQ(loop->counters().checkpoints_saved, 1u);  // the prompt's end, 40
    EXPECT_EQ(loop->counters().prefill_tokens, 40u);
    // An edit at the end: resumes from the snapshot at 32 (in RAM).
    const auto edited = edit_at(p, 37, {7, 8});
    Outcome b = run(*loop, edited);
    EXPECT_EQ(b.started.plan.restored, 32);
    EXPECT_EQ(b.started.prefill_tokens, 39 - 32);
    expect_identical(b, run(*fresh, edited));
    loop->wait_checkpoint_writes();
    EXPECT_EQ(loop->counters().snapshot_writes_dropped, 0u);
  }
  // engined restarted: a new loop and store on the same directory.
  {
    auto loop = snapshot_loop(dir);
    EXPECT_GT(loop->counters().checkpoint_disk_bytes, 0u);
    const auto edited = edit_at(p, 35, {11});
    Outcome b = run(*loop, edited);
    EXPECT_EQ(b.started.plan.restored, 32);
    EXPECT_EQ(b.started.prefill_tokens, 36 - 32);
    expect_identical(b, run(*fresh, edited));
  }
  // One byte flipped in the payload of the snapshot at 32: refused, the one
  // at 24 used and the rest recomputed.
  const std::string f32 = file_of(dir, p, 32);
  ASSERT_TRUE(fs::exists(f32));
  {
    std::fstream f(f32, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(4096);
    const char byte = static_cast<char>(f.get());
    f.seekp(4096);
    f.put(static_cast<char>(byte ^ 0x01));
  }
  {
    auto loop = snapshot_loop(dir);
    const auto edited = edit_at(p, 34, {12});
    Outcome b = run(*loop, edited);
    EXPECT_EQ(b.started.plan.restored, 24);
    EXPECT_EQ(b.started.prefill_tokens, 35 - 24);
    expect_identical(b, run(*fresh, edited));
    // Recomputed, the snapshot at 32 is saved again: a valid file replaces
    // the corrupt one.
    EXPECT_EQ(loop->counters().snapshots_saved, 1u);
    loop->wait_checkpoint_writes();
    auto m = Model::load(testing::tiny_model_dir(), {}, EngineOptions{});
    const std::vector<int32_t> t32(p.begin(), p.begin() + 32);
    EXPECT_TRUE(read_snapshot_file(f32, (*m)->config(),
                                   {(*m)->fingerprint(), (*m)->options().quant.dense_bits, 1.0f},
                                   t32)
                    .ok());
  }
}

TEST(Snapshots, PiecesAreCutAtMultiplesOnlyWhereNeeded) {
  // Restored at 40 (a turn end, not a multiple of 8): the next piece ends at
  // 48, realigned; then 16-token chunks cut at every multiple of 8.
  auto loop = snapshot_loop("");
  const auto p = ramp(40);
  ASSERT_EQ(run(*loop, p, 0).end.kind, ServeEvent::Kind::kFinished);
  auto longer = ramp(61);
  longer[39] = p[39];
  auto fresh = snapshot_loop("");
  const Outcome a = run(*loop, longer, 0);
  EXPECT_EQ(a.started.plan.reused + a.started.plan.restored, 40);
  EXPECT_EQ(loop->counters().snapshots_saved, 4u + 2u);  // + 48, 56
  expect_identical(run(*loop, longer, 3), run(*testing::make_loop(1), longer, 3));
}

TEST(Snapshots, ZeroTurnsThemOff) {
  EngineOptions o;
  o.chunk = 16;
  auto model = Model::load(testing::tiny_model_dir(), {}, o);
  ASSERT_TRUE(model.ok());
  EngineLoopOptions lo;
  lo.sessions = 1;
  lo.chunk_policy = false;  // pieces of o.chunk
  lo.checkpoints.budget_bytes = 64u << 20;
  lo.snapshot_tokens = 0;
  auto loop = EngineLoop::create(std::move(*model), lo);
  ASSERT_TRUE(loop.ok());
  const auto p = ramp(40);
  ASSERT_EQ(run(**loop, p, 0).end.kind, ServeEvent::Kind::kFinished);
  EXPECT_EQ((*loop)->counters().snapshots_saved, 0u);
  EXPECT_EQ(run(**loop, edit_at(p, 37, {7}), 1).started.plan.restored, 0);
}

TEST(Snapshots, ACancelledPrefillKeepsItsSnapshots) {
  auto loop = snapshot_loop("", 512u << 20);
  const auto p = ramp(6000);
  ServeRequest r;
  r.request_id = "long";
  r.prompt = p;
  r.max_tokens = 1;
  auto h = loop->submit(r);
  ASSERT_TRUE(h.ok());
  // Cancel once three snapshots are saved (counted, not timed).
  for (int i = 0; i < 120000 && loop->counters().snapshots_saved < 3; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  (*h)->cancel();
  ServeEvent e;
  for (;;) {
    ASSERT_TRUE((*h)->next(&e, 120000));
    if (e.kind == ServeEvent::Kind::kFailed || e.kind == ServeEvent::Kind::kFinished) break;
  }
  ASSERT_EQ(e.kind, ServeEvent::Kind::kFailed);
  EXPECT_EQ(e.status.code(), absl::StatusCode::kCancelled);
  const uint64_t kept = loop->counters().snapshots_saved;
  ASSERT_GE(kept, 3u);
  ASSERT_LT(kept, 6000u / kEvery);
  const auto edited = edit_at(p, 20, {3});  // shares 20 tokens: the snapshot at 16
  Outcome b = run(*loop, edited);
  EXPECT_EQ(b.started.plan.restored, 16);
  expect_identical(b, run(*testing::make_loop(1), edited));
}

}  // namespace
}  // namespace k3::engined
