// gateway/core/admission.h: the bound on running and waiting requests, the
// order waiters are served in, deadlines and cancellation leaving the line.
#include "gateway/core/admission.h"

#include <gtest/gtest.h>

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

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

// A waiter hears its place in line (1 = next) as the line moves, and a
// false from `waiting` takes it out of the line.
TEST(Admission, AWaiterHearsItsPlaceAndCanLeave) {
  AdmissionQueue q(1, 8);
  auto held = q.enter(in(10), nullptr);
  ASSERT_TRUE(held.ok());
  std::mutex mu;
  std::vector<int> first_places, second_places;
  auto record = [&mu](std::vector<int>* v) {
    return [&mu, v](int place) {
      std::lock_guard<std::mutex> lk(mu);
      if (v->empty() || v->back() != place) v->push_back(place);
      return true;
    };
  };
  std::atomic<bool> second_moved_up{false};
  std::thread first([&] {
    auto t = q.enter(in(30), nullptr, 1, record(&first_places));
    EXPECT_TRUE(t.ok());
    // Runs until the second has heard it is next.
    while (!second_moved_up) std::this_thread::yield();
  });
  while (q.waiting() != 1) std::this_thread::yield();
  std::atomic<bool> second_in{false};
  std::thread second([&] {
    auto t = q.enter(in(30), nullptr, 1, record(&second_places));
    EXPECT_TRUE(t.ok());
    second_in = true;
  });
  while (q.waiting() != 2) std::this_thread::yield();
  held->release();  // the first runs: the second moves up
  for (bool up = false; !up; std::this_thread::yield()) {
    std::lock_guard<std::mutex> lk(mu);
    up = second_places.size() == 2;
  }
  second_moved_up = true;
  first.join();
  second.join();
  EXPECT_TRUE(second_in);
  EXPECT_EQ(first_places, std::vector<int>{1});
  EXPECT_EQ(second_places, (std::vector<int>{2, 1}));

  auto again = q.enter(in(10), nullptr);
  ASSERT_TRUE(again.ok());
  std::atomic<int> calls{0};
  auto left = q.enter(in(30), nullptr, 1, [&](int) { return ++calls < 3; });
  EXPECT_EQ(left.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 3);
  EXPECT_EQ(q.waiting(), 0);
}

}  // namespace
}  // namespace k3::gateway
