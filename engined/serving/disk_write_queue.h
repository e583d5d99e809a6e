// A bounded queue of disk writes run by one thread of its own, so that the
// thread posting them (engined's engine loop) never waits for a disk: a
// post into a full queue is dropped and counted, never blocks. Each write
// carries a tag; its outcome comes back through take_done(), which the
// poster drains when it likes (no callback runs on the poster's behalf).
//
// Thread-safe: every method may be called from any thread.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "shared/status.h"

namespace k3::engined {

class DiskWriteQueue {
 public:
  struct Done {
    uint64_t tag = 0;
    Status status;
  };

  // At most `capacity` writes waiting (the one being written not counted);
  // capacity >= 1.
  explicit DiskWriteQueue(size_t capacity);
  // Runs the writes still queued, then stops.
  ~DiskWriteQueue();
  DiskWriteQueue(const DiskWriteQueue&) = delete;
  DiskWriteQueue& operator=(const DiskWriteQueue&) = delete;

  // Queues `write` under `tag`; false (and counted in dropped()) when the
  // queue is full.
  bool try_post(uint64_t tag, std::function<Status()> write);
  // Outcomes of the writes finished since the last call, in order.
  std::vector<Done> take_done();
  // Waits until every write posted so far has finished (its outcome is then
  // in take_done()).
  void wait_idle();

  uint64_t dropped() const;
  uint64_t written() const;  // writes that returned OK
  uint64_t failed() const;   // writes that returned an error

 private:
  struct Item {
    uint64_t tag;
    std::function<Status()> write;
  };
  void run();

  const size_t capacity_;
  mutable std::mutex mu_;
  std::condition_variable cv_;       // work posted or stopping
  std::condition_variable idle_cv_;  // a write finished
  std::deque<Item> queue_;
  std::vector<Done> done_;
  bool busy_ = false;
  bool stop_ = false;
  uint64_t dropped_ = 0, written_ = 0, failed_ = 0;
  std::thread thread_;
};

}  // namespace k3::engined
