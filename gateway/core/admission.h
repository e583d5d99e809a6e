// Request admission: at most `slots` requests run at once (engined's
// sessions), up to `max_waiting` more wait in first-come order, and the rest
// are refused at once (RESOURCE_EXHAUSTED -> HTTP 429) instead of piling up.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>

#include "shared/status.h"

namespace k3::gateway {

class AdmissionQueue;

// Running slots (one per choice of the request); released when destroyed.
// Move-only.
class Ticket {
 public:
  Ticket() = default;
  Ticket(Ticket&& o) noexcept : q_(o.q_), count_(o.count_) { o.q_ = nullptr; }
  Ticket& operator=(Ticket&& o) noexcept;
  Ticket(const Ticket&) = delete;
  Ticket& operator=(const Ticket&) = delete;
  ~Ticket();
  void release();

 private:
  friend class AdmissionQueue;
  Ticket(AdmissionQueue* q, int count) : q_(q), count_(count) {}
  AdmissionQueue* q_ = nullptr;
  int count_ = 1;
};

// Thread-safe.
class AdmissionQueue {
 public:
  AdmissionQueue(int slots, int max_waiting);

  // Waits for `count` slots (a request's choices, each its own engined
  // session) in arrival order. RESOURCE_EXHAUSTED when `max_waiting`
  // requests already wait; DEADLINE_EXCEEDED at `deadline`; CANCELLED when
  // `alive` (polled a few times a second) turns false. `count` > 1 is
  // refused at once (INVALID_ARGUMENT naming 'n', param "n") when more than
  // that many slots are busy on arrival: n is at most the free sessions.
  // `waiting` (may be empty) is told the request's place in line (1 = next)
  // when it starts waiting and each time the wait wakes (at least five times
  // a second), without the queue's lock held; false ends the wait as a gone
  // client does (CANCELLED).
  StatusOr<Ticket> enter(std::chrono::steady_clock::time_point deadline,
                         const std::function<bool()>& alive, int count = 1,
                         const std::function<bool(int place)>& waiting = {});
  // engined's session count, learnt at run time.
  void set_slots(int slots);

  int running() const;
  int waiting() const;
  int slots() const;

 private:
  friend class Ticket;
  void leave(int count);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  int slots_;
  int max_waiting_;
  int running_ = 0;
  uint64_t next_waiter_ = 0;
  std::deque<uint64_t> line_;  // waiters in arrival order
};

}  // namespace k3::gateway
