// gateway/core/admission.h: the bound on running and waiting requests, the
// order waiters are served in, deadlines and cancellation leaving the line.
#include "gateway/core/admission.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace k3::gateway {
namespace {

using Clock = std::chrono::steady_clock;
Clock::time_point in(double s) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

TEST(Admission, RunsUpToTheSlotsQueuesUpToTheBoundRefusesTheRest) {
  AdmissionQueue q(2, 1);
  auto a = q.enter(in(10), nullptr);
  auto b = q.enter(in(10), nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(q.running(), 2);
  std::atomic<bool> c_in{false};
  std::thread waiter([&] {
    auto c = q.enter(in(30), nullptr);
    ASSERT_TRUE(c.ok()) << c.status();
    c_in = true;
  });
  while (q.waiting() != 1) std::this_thread::yield();
  auto d = q.enter(in(10), nullptr);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(d.status().message().find("busy"), std::string::npos);
  EXPECT_FALSE(c_in);
  a->release();
  waiter.join();
  EXPECT_TRUE(c_in);
  EXPECT_EQ(q.waiting(), 0);
}

TEST(Admission, ServesWaitersInArrivalOrder) {
  AdmissionQueue q(1, 8);
  auto first = q.enter(in(10), nullptr);
  ASSERT_TRUE(first.ok());
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) {
    ts.emplace_back([&, i] {
      auto t = q.enter(in(30), nullptr);
      ASSERT_TRUE(t.ok());
      std::lock_guard<std::mutex> lk(mu);
      order.push_back(i);
    });
    while (q.waiting() != i + 1) std::this_thread::yield();  // arrive in order
  }
  first->release();
  for (auto& t : ts) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

TEST(Admission, DeadlineAndCancellationLeaveTheLine) {
  AdmissionQueue q(1, 8);
  auto held = q.enter(in(10), nullptr);
  ASSERT_TRUE(held.ok());
  auto late = q.enter(in(0.3), nullptr);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  std::atomic<bool> alive{true};
  std::thread gone([&] {
    auto t = q.enter(in(30), [&] { return alive.load(); });
    EXPECT_EQ(t.status().code(), absl::StatusCode::kCancelled);
  });
  // A later arrival must not be stuck behind the two that left.
  std::atomic<bool> next_in{false};
  while (q.waiting() != 1) std::this_thread::yield();
  std::thread next([&] {
    auto t = q.enter(in(30), nullptr);
    EXPECT_TRUE(t.ok());
    next_in = true;
  });
  while (q.waiting() != 2) std::this_thread::yield();
  alive = false;
  gone.join();
  held->release();
  next.join();
  EXPECT_TRUE(next_in);
  EXPECT_EQ(q.running(), 0);
}

}  // namespace
}  // namespace k3::gateway
