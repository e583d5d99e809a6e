// What a starting daemon tells the service manager (service_notify.h) while
// its start takes long (engined loading a model for minutes): STATUS=<phase>
// (<elapsed>) and EXTEND_TIMEOUT_USEC, on every tick in which the process
// made progress: its CPU time advanced by a share of the tick, or it read
// from storage. A start that stalls (a hung read) stops being
// extended, so the unit's start timeout still ends it.
//
// Without $NOTIFY_SOCKET it starts no thread and sends nothing.
// Thread-safe: phase() may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <string>
#include <thread>

namespace k3::base {

class StartProgress {
 public:
  struct Options {
    double tick_seconds = 10;  // how often progress is checked
    // Each extension: the start timeout is at least this from now (several
    // ticks, so a tick that comes late on a loaded machine loses nothing).
    double extend_seconds = 60;
    // Progress: CPU time of at least this share of a tick, or bytes read
    // (any from a block device, 64 KiB through read calls).
    double min_cpu_share = 0.02;
  };

  explicit StartProgress(std::string phase);
  StartProgress(std::string phase, Options options);
  ~StartProgress();  // stops the thread; sends nothing more
  StartProgress(const StartProgress&) = delete;
  StartProgress& operator=(const StartProgress&) = delete;

  // The new phase ("loading the model from /var/lib/k3serve/model"), sent as
  // STATUS now.
  void phase(std::string what);
  // Extensions sent so far.
  int extensions() const;

 private:
  struct Sample {
    double cpu_seconds = 0;
    uint64_t read_bytes = 0;
    uint64_t read_chars = 0;
  };
  static Sample sample();
  std::string status_locked() const;
  void run();

  const Options opt_;
  const std::chrono::steady_clock::time_point start_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::string phase_;
  bool stop_ = false;
  int extensions_ = 0;
  std::thread thread_;
};

}  // namespace k3::base
