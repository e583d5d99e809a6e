#include "gateway/core/admission.h"

#include <algorithm>

namespace k3::gateway {

Ticket& Ticket::operator=(Ticket&& o) noexcept {
  if (this != &o) {
    release();
    q_ = o.q_;
    o.q_ = nullptr;
  }
  return *this;
}

Ticket::~Ticket() {
  release();
}

void Ticket::release() {
  if (q_ != nullptr) q_->leave();
  q_ = nullptr;
}

AdmissionQueue::AdmissionQueue(int slots, int max_waiting)
    : slots_(std::max(1, slots)), max_waiting_(std::max(0, max_waiting)) {}

StatusOr<Ticket> AdmissionQueue::enter(std::chrono::steady_clock::time_point deadline,
                                       const std::function<bool()>& alive) {
  std::unique_lock<std::mutex> lk(mu_);
  if (waiting_ == 0 && running_ < slots_) {
    ++running_;
    ++next_ticket_;
    ++serving_;
    return Ticket(this);
  }
  if (waiting_ >= max_waiting_)
    return absl::ResourceExhaustedError(cat("server busy: ", running_, " requests running and ",
                                            waiting_, " waiting (the queue bound); retry later"));
  const uint64_t mine = next_ticket_++;
  ++waiting_;
  Status why;
  for (;;) {
    if (serving_ == mine && running_ < slots_) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      why = absl::DeadlineExceededError("request deadline passed while queued");
    } else if (alive && !alive()) {
      why = absl::CancelledError("client went away while queued");
    }
    if (!why.ok()) {
      // Leaving the line: the waiters behind move up. Numbers are handed out
      // in order, so the one being served skips the gap this leaves.
      --waiting_;
      if (serving_ == mine)
        ++serving_;
      else
        abandoned_.push_back(mine);
      skip_abandoned();
      cv_.notify_all();
      return why;
    }
    cv_.wait_for(lk, std::chrono::milliseconds(200));
  }
  --waiting_;
  ++running_;
  ++serving_;
  skip_abandoned();
  cv_.notify_all();
  return Ticket(this);
}

void AdmissionQueue::skip_abandoned() {
  for (bool moved = true; moved;) {
    moved = false;
    auto it = std::find(abandoned_.begin(), abandoned_.end(), serving_);
    if (it != abandoned_.end()) {
      abandoned_.erase(it);
      ++serving_;
      moved = true;
    }
  }
}

void AdmissionQueue::leave() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    --running_;
  }
  cv_.notify_all();
}

void AdmissionQueue::set_slots(int slots) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    slots_ = std::max(1, slots);
  }
  cv_.notify_all();
}

int AdmissionQueue::running() const {
  std::lock_guard<std::mutex> lk(mu_);
  return running_;
}
int AdmissionQueue::waiting() const {
  std::lock_guard<std::mutex> lk(mu_);
  return waiting_;
}
int AdmissionQueue::slots() const {
  std::lock_guard<std::mutex> lk(mu_);
  return slots_;
}

}  // namespace k3::gateway
