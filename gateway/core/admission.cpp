#include "gateway/core/admission.h"

#include <algorithm>

#include "gateway/core/status_codes.h"

namespace k3::gateway {

Ticket& Ticket::operator=(Ticket&& o) noexcept {
  if (this != &o) {
    release();
    q_ = o.q_;
    count_ = o.count_;
    o.q_ = nullptr;
  }
  return *this;
}

Ticket::~Ticket() {
  release();
}

void Ticket::release() {
  if (q_ != nullptr) q_->leave(count_);
  q_ = nullptr;
}

AdmissionQueue::AdmissionQueue(int slots, int max_waiting)
    : slots_(std::max(1, slots)), max_waiting_(std::max(0, max_waiting)) {}

StatusOr<Ticket> AdmissionQueue::enter(std::chrono::steady_clock::time_point deadline,
                                       const std::function<bool()>& alive, int count,
                                       const std::function<bool(int place)>& waiting) {
  count = std::max(1, count);
  std::unique_lock<std::mutex> lk(mu_);
  if (count > 1 && count > slots_ - running_)
    return with_param(absl::InvalidArgumentError(
                          cat("'n' is ", count, " but only ", std::max(0, slots_ - running_),
                              " of the engine's ", slots_, " sessions are free (one per choice)")),
                      "n");
  if (line_.empty() && running_ + count <= slots_) {
    running_ += count;
    return Ticket(this, count);
  }
  if (static_cast<int>(line_.size()) >= max_waiting_)
    return absl::ResourceExhaustedError(cat("server busy: ", running_, " requests running and ",
                                            line_.size(),
                                            " waiting (the queue bound); retry later"));
  const uint64_t mine = ++next_waiter_;
  line_.push_back(mine);
  Status why;
  for (;;) {
    if (line_.front() == mine && running_ + count <= slots_) break;
    if (std::chrono::steady_clock::now() >= deadline) {
      why = absl::DeadlineExceededError("request deadline passed while queued");
    } else if (alive && !alive()) {
      why = absl::CancelledError("client went away while queued");
    } else if (waiting) {
      // The client is told its place; its write may block, so unlocked (the
      // line may move meanwhile: the loop looks again).
      const int place =
          static_cast<int>(std::find(line_.begin(), line_.end(), mine) - line_.begin()) + 1;
      lk.unlock();
      const bool still = waiting(place);
      lk.lock();
      if (!still) why = absl::CancelledError("client went away while queued");
    }
    if (!why.ok()) {
      line_.erase(std::find(line_.begin(), line_.end(), mine));
      cv_.notify_all();  // the one behind may now be first
      return why;
    }
    if (line_.front() == mine && running_ + count <= slots_) break;
    cv_.wait_for(lk, std::chrono::milliseconds(200));
  }
  line_.pop_front();
  running_ += count;
  cv_.notify_all();
  return Ticket(this, count);
}

void AdmissionQueue::leave(int count) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    running_ -= count;
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
  return static_cast<int>(line_.size());
}
int AdmissionQueue::slots() const {
  std::lock_guard<std::mutex> lk(mu_);
  return slots_;
}

}  // namespace k3::gateway
