// A slow checkpoint disk (faultfs --writable with a delay on every snapshot
// file's first write): the engine loop's steps never wait for it. Every
// snapshot is saved in RAM at once and the next request resumes from the
// deepest; the disk writes that find the queue full are dropped and counted
// (k3_snapshot_writes_dropped_total).
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>

#include "engined/serving/engine_loop.h"
#include "tests/faults/fault_fs.h"
#include "tests/test_util.h"

namespace k3::engined {
namespace {

namespace fs = std::filesystem;
using faults_test::FaultFs;

constexpr int kDelayMs = 4000;  // per snapshot file written

std::vector<int32_t> ramp(int n) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(5 + (i * 37) % 3000);
  return v;
}

ServeEvent run(EngineLoop& loop, std::vector<int32_t> prompt, ServeEvent* started) {
  ServeRequest r;
  r.request_id = "slow-disk";
  r.prompt = std::move(prompt);
  r.max_tokens = 1;
  auto h = loop.submit(std::move(r));
  EXPECT_TRUE(h.ok()) << h.status();
  ServeEvent e;
  for (;;) {
    if (!(*h)->next(&e, 300000)) {
      ADD_FAILURE() << "no event within 300 s";
      return e;
    }
    if (e.kind == ServeEvent::Kind::kStarted) *started = e;
    if (e.kind == ServeEvent::Kind::kFinished || e.kind == ServeEvent::Kind::kFailed) return e;
  }
}

TEST(SlowDisk, SnapshotWritesNeverStallTheStepsAndDropsAreCounted) {
  if (std::string why = FaultFs::unavailable(); !why.empty()) GTEST_SKIP() << why;
  testing::TempDir tmp;
  fs::create_directories(tmp.file("disk"));
  FaultFs disk(tmp.file("disk"), tmp.file("mnt"), tmp.path(), /*writable=*/true);
  ASSERT_TRUE(disk.ok()) << disk.log();
  disk.set("*k3snap* 0 1 delay " + std::to_string(kDelayMs) + "\n");

  EngineOptions o;
  o.chunk = 16;
  auto model = Model::load(testing::tiny_model_dir(), {}, o);
  ASSERT_TRUE(model.ok()) << model.status();
  EngineLoopOptions lo;
  lo.sessions = 1;
  lo.chunk_policy = false;  // pieces of o.chunk
  lo.checkpoints.budget_bytes = 256u << 20;
  lo.checkpoints.dir = disk.mountpoint();
  lo.checkpoints.disk_budget_bytes = 1ull << 30;
  lo.checkpoints.write_queue = 1;
  lo.snapshot_tokens = 8;
  auto loop = EngineLoop::create(std::move(*model), lo);
  ASSERT_TRUE(loop.ok()) << loop.status();

  // 200 tokens: 24 snapshots and the prompt's end, 25 files to write.
  const auto p = ramp(200);
  ServeEvent started;
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_EQ(run(**loop, p, &started).kind, ServeEvent::Kind::kFinished);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const EngineCounters c = (*loop)->counters();
  EXPECT_EQ(c.snapshots_saved, 24u);
  EXPECT_EQ(c.checkpoints_saved, 1u);
  // Waiting for each write would take 25 x 4 s; the prefill does not wait
  // (generous: half of that on a loaded machine).
  EXPECT_LT(seconds, 25 * kDelayMs / 1000.0 / 2) << "the steps waited for the disk";
  // A write in progress and one queued at a time: the others are dropped,
  // at most one more per 4 s the prefill took.
  const uint64_t accepted_at_most = 2 + static_cast<uint64_t>(seconds * 1000 / kDelayMs);
  EXPECT_GE(c.snapshot_writes_dropped, 25 - std::min<uint64_t>(25, accepted_at_most));
  EXPECT_GT(c.snapshot_writes_dropped, 0u);

  // The RAM copies are synchronous: the next request resumes from the
  // deepest snapshot at once.
  auto edited = p;
  edited.resize(197);
  edited.push_back(3);
  ServeEvent again;
  ASSERT_EQ(run(**loop, edited, &again).kind, ServeEvent::Kind::kFinished);
  EXPECT_EQ(again.plan.restored, 192);

  // The accepted writes finish (slowly); exactly those files are on disk
  // (the second request's end, 198, was one more save).
  disk.clear();
  (*loop)->wait_checkpoint_writes();
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(disk.mountpoint()))
    files += e.path().extension() == ".k3snap";
  EXPECT_EQ(files + (*loop)->counters().snapshot_writes_dropped, 26u);
  EXPECT_NE(disk.log().find("faultfs: delay"), std::string::npos);
}

}  // namespace
}  // namespace k3::engined
