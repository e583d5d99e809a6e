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

#include "shared/base/status.h"

namespace k3::gateway {

class AdmissionQueue;

// A running slot; released when destroyed. Move-only.
class Ticket {
 public:
  Ticket() = default;
  Ticket(Ticket&& o) noexcept : q_(o.q_) { o.q_ = nullptr; }
  Ticket& operator=(Ticket&& o) noexcept;
  Ticket(const Ticket&) = delete;
  Ticket& operator=(const Ticket&) = delete;
  ~Ticket();
  void release();

 private:
  friend class AdmissionQueue;
  explicit Ticket(AdmissionQueue* q) : q_(q) {}
  AdmissionQueue* q_ = nullptr;
};

// Thread-safe.
class AdmissionQueue {
 public:
  AdmissionQueue(int slots, int max_waiting);

  // Waits for a slot in arrival order. RESOURCE_EXHAUSTED when `max_waiting`
  // requests already wait; DEADLINE_EXCEEDED at `deadline`; CANCELLED when
  // `alive` (polled a few times a second) turns false.
  StatusOr<Ticket> enter(std::chrono::steady_clock::time_point deadline,
                         const std::function<bool()>& alive);
  // engined's session count, learnt at run time.
  void set_slots(int slots);

  int running() const;
  int waiting() const;
  int slots() const;

 private:
  friend class Ticket;
  void leave();

  mutable std::mutex mu_;
  std::condition_variable cv_;
  int slots_;
  int max_waiting_;
  int running_ = 0;
  uint64_t next_waiter_ = 0;
  std::deque<uint64_t> line_;  // waiters in arrival order
};

}  // namespace k3::gateway
