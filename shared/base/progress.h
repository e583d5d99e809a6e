// Progress with an ETA for long work (writing models, manifests, verifying,
// repacking): on a terminal a bar redrawn in place; in logs (stderr not a
// terminal) one line every few seconds ($K3_PROGRESS_LOG_SECONDS, default 5).
// Output goes to stderr only.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace k3::base {

// Thread-safe: advance() may be called from any thread.
class Progress {
 public:
  // `total` is in `unit`s ("B" prints as MB/GB with a rate; anything else as
  // plain counts). `quiet` prints nothing at all.
  Progress(std::string label, uint64_t total, std::string unit = "B", bool quiet = false);
  ~Progress();  // finish() if not done
  Progress(const Progress&) = delete;
  Progress& operator=(const Progress&) = delete;

  // Work already done before this run (a resumed job): counted as done but
  // not in the rate.
  void skip(uint64_t n);
  void advance(uint64_t n);
  // Prints the final line (once).
  void finish();

  // "1m05s", "3h02m", "12s": the format of the ETA field.
  static std::string format_seconds(double s);

 private:
  void maybe_print(bool force);
  std::string line() const;

  const std::string label_;
  const uint64_t total_;
  const std::string unit_;
  const bool quiet_;
  const bool tty_;
  const double log_interval_;  // seconds between log lines (off a terminal)
  const std::chrono::steady_clock::time_point start_;
  std::atomic<uint64_t> done_{0};
  std::atomic<uint64_t> skipped_{0};
  std::mutex print_mu_;
  std::chrono::steady_clock::time_point last_print_;
  bool finished_ = false;
};

}  // namespace k3::base
