// The disk writer's queue: a post into a full queue is dropped and counted
// at once (the poster never waits for the disk); outcomes come back in order
// under their tags; the destructor finishes what is queued.
#include "engined/serving/disk_write_queue.h"

#include <gtest/gtest.h>

#include <atomic>
#include <future>

namespace k3::engined {
namespace {

TEST(DiskWriteQueue, AFullQueueDropsAndCountsWithoutWaiting) {
  std::promise<void> release;
  std::shared_future<void> gate = release.get_future().share();
  std::atomic<int> ran{0};
  DiskWriteQueue q(2);
  // The first write blocks the writer (a stalled disk); two more fill the
  // queue; the next ones are dropped, and posting them returns at once.
  std::promise<void> started;
  ASSERT_TRUE(q.try_post(1, [&] {
    started.set_value();
    gate.wait();
    ++ran;
    return absl::OkStatus();
  }));
  started.get_future().wait();
  auto ok = [&] {
    ++ran;
    return absl::OkStatus();
  };
  EXPECT_TRUE(q.try_post(2, ok));
  EXPECT_TRUE(q.try_post(3, [&] {
    ++ran;
    return absl::UnavailableError("disk full");
  }));
  EXPECT_FALSE(q.try_post(4, ok));
  EXPECT_FALSE(q.try_post(5, ok));
  EXPECT_EQ(q.dropped(), 2u);
  EXPECT_TRUE(q.take_done().empty());
  release.set_value();
  q.wait_idle();
  EXPECT_EQ(ran.load(), 3);
  auto done = q.take_done();
  ASSERT_EQ(done.size(), 3u);
  EXPECT_EQ(done[0].tag, 1u);
  EXPECT_EQ(done[1].tag, 2u);
  EXPECT_EQ(done[2].tag, 3u);
  EXPECT_TRUE(done[1].status.ok());
  EXPECT_EQ(done[2].status.code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(q.written(), 2u);
  EXPECT_EQ(q.failed(), 1u);
  EXPECT_TRUE(q.take_done().empty());
  // Room again.
  EXPECT_TRUE(q.try_post(6, ok));
}

TEST(DiskWriteQueue, TheDestructorFinishesTheQueuedWrites) {
  std::atomic<int> ran{0};
  {
    DiskWriteQueue q(8);
    for (int i = 0; i < 8; ++i)
      q.try_post(static_cast<uint64_t>(i), [&] {
        ++ran;
        return absl::OkStatus();
      });
  }
  EXPECT_EQ(ran.load(), 8);
}

}  // namespace
}  // namespace k3::engined
