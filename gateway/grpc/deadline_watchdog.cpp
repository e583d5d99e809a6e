#include "gateway/grpc/deadline_watchdog.h"

namespace k3::gateway {

DeadlineWatchdog::Guard::~Guard() {
  if (dog_ != nullptr) dog_->end(id_);
}

DeadlineWatchdog::DeadlineWatchdog() : thread_([this] { run(); }) {}

DeadlineWatchdog::~DeadlineWatchdog() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

DeadlineWatchdog::Guard DeadlineWatchdog::watch(Clock::time_point deadline,
                                                std::function<void()> fire) {
  std::lock_guard<std::mutex> lk(mu_);
  const uint64_t id = ++next_id_;
  due_.emplace(deadline, std::make_pair(id, std::move(fire)));
  cv_.notify_all();
  return Guard(this, id);
}

void DeadlineWatchdog::end(uint64_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  for (auto it = due_.begin(); it != due_.end(); ++it)
    if (it->second.first == id) {
      due_.erase(it);
      return;
    }
}

void DeadlineWatchdog::run() {
  std::unique_lock<std::mutex> lk(mu_);
  while (!stop_) {
    if (due_.empty()) {
      cv_.wait(lk);
      continue;
    }
    auto first = due_.begin();
    if (Clock::now() < first->first) {
      cv_.wait_until(lk, first->first);
      continue;
    }
    // Under the lock: a Guard being destroyed waits, so what `fire` refers
    // to is still there.
    first->second.second();
    due_.erase(first);
  }
}

}  // namespace k3::gateway
