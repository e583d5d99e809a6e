// Runs an action when a deadline passes unless the watch ends first: the
// gateway cancels a gRPC call at its request deadline even while the call is
// blocked writing to a client that does not read (a synchronous Write waits
// on flow control and checks nothing).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace k3::gateway {

// Thread-safe. One thread sleeps until the earliest deadline.
class DeadlineWatchdog {
 public:
  using Clock = std::chrono::steady_clock;

  // Ends the watch when destroyed; after that `fire` never runs (a firing in
  // progress finishes first). Move-only.
  class Guard {
   public:
    Guard(Guard&& o) noexcept : dog_(o.dog_), id_(o.id_) { o.dog_ = nullptr; }
    Guard(const Guard&) = delete;
    Guard& operator=(const Guard&) = delete;
    Guard& operator=(Guard&&) = delete;
    ~Guard();

   private:
    friend class DeadlineWatchdog;
    Guard(DeadlineWatchdog* dog, uint64_t id) : dog_(dog), id_(id) {}
    DeadlineWatchdog* dog_;
    uint64_t id_;
  };

  DeadlineWatchdog();
  ~DeadlineWatchdog();

  // `fire` runs on the watchdog's thread, under its lock: keep it short and
  // non-blocking (ServerContext::TryCancel).
  Guard watch(Clock::time_point deadline, std::function<void()> fire);

 private:
  void run();
  void end(uint64_t id);

  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  uint64_t next_id_ = 0;
  std::multimap<Clock::time_point, std::pair<uint64_t, std::function<void()>>> due_;
  std::thread thread_;
};

}  // namespace k3::gateway
