#include "engined/serving/disk_write_queue.h"

#include <algorithm>

namespace k3::engined {

DiskWriteQueue::DiskWriteQueue(size_t capacity)
    : capacity_(std::max<size_t>(1, capacity)), thread_([this] { run(); }) {}

DiskWriteQueue::~DiskWriteQueue() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

bool DiskWriteQueue::try_post(uint64_t tag, std::function<Status()> write) {
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (queue_.size() >= capacity_) {
      ++dropped_;
      return false;
    }
    queue_.push_back({tag, std::move(write)});
  }
  cv_.notify_all();
  return true;
}

std::vector<DiskWriteQueue::Done> DiskWriteQueue::take_done() {
  std::lock_guard<std::mutex> lk(mu_);
  std::vector<Done> out;
  out.swap(done_);
  return out;
}

void DiskWriteQueue::wait_idle() {
  std::unique_lock<std::mutex> lk(mu_);
  idle_cv_.wait(lk, [&] { return queue_.empty() && !busy_; });
}

uint64_t DiskWriteQueue::dropped() const {
  std::lock_guard<std::mutex> lk(mu_);
  return dropped_;
}

uint64_t DiskWriteQueue::written() const {
  std::lock_guard<std::mutex> lk(mu_);
  return written_;
}

uint64_t DiskWriteQueue::failed() const {
  std::lock_guard<std::mutex> lk(mu_);
  return failed_;
}

void DiskWriteQueue::run() {
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait(lk, [&] { return stop_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping with nothing left
    Item item = std::move(queue_.front());
    queue_.pop_front();
    busy_ = true;
    lk.unlock();
    Status st = item.write();
    item.write = nullptr;  // what it held goes before the next write starts
    lk.lock();
    busy_ = false;
    (st.ok() ? written_ : failed_) += 1;
    done_.push_back({item.tag, std::move(st)});
    idle_cv_.notify_all();
  }
}

}  // namespace k3::engined
