#include "shared/base/progress.h"

#include "shared/base/log_format.h"

#include <unistd.h>

#include <cstdio>
#include <cstdlib>

namespace k3::base {
namespace {

using Clock = std::chrono::steady_clock;

// Redraws on a terminal at most this often; log lines this far apart.
constexpr double kTtyInterval = 0.2;
constexpr double kDefaultLogInterval = 5.0;

// $K3_PROGRESS_LOG_SECONDS when it is a positive number, else 5 s.
double log_interval() {
  const double interval = [] {
    const char* env = std::getenv("K3_PROGRESS_LOG_SECONDS");
    if (env == nullptr) return kDefaultLogInterval;
    char* end = nullptr;
    const double v = std::strtod(env, &end);
    if (end == env || *end != '\0' || !(v > 0) || v > 86400) {
      std::fprintf(stderr,
                   "warning: K3_PROGRESS_LOG_SECONDS='%s' is not a number of seconds in "
                   "(0, 86400]; using %.0f\n",
                   env, kDefaultLogInterval);
      return kDefaultLogInterval;
    }
    return v;
  }();
  return interval;
}

std::string amount(double v, const std::string& unit) {
  char buf[64];
  if (unit == "B") {
    if (v >= 1e9)
      std::snprintf(buf, sizeof buf, "%.2f GB", v / 1e9);
    else
      std::snprintf(buf, sizeof buf, "%.1f MB", v / 1e6);
  } else {
    std::snprintf(buf, sizeof buf, "%.0f %s", v, unit.c_str());
  }
  return buf;
}

}  // namespace

Progress::Progress(std::string label, uint64_t total, std::string unit, bool quiet)
    : label_(std::move(label)),
      total_(total),
      unit_(std::move(unit)),
      quiet_(quiet),
      // A terminal gets a bar, unless the log lines are JSON (--log-format).
      tty_(::isatty(STDERR_FILENO) == 1 && !log_format_is_json()),
      log_interval_(tty_ || quiet ? kDefaultLogInterval : log_interval()),
      start_(Clock::now()),
      last_print_(start_) {}

Progress::~Progress() {
  finish();
}

std::string Progress::format_seconds(double s) {
  if (!(s >= 0) || s > 1e8) return "?";
  const long t = static_cast<long>(s + 0.5);
  char buf[32];
  if (t >= 3600)
    std::snprintf(buf, sizeof buf, "%ldh%02ldm", t / 3600, (t / 60) % 60);
  else if (t >= 60)
    std::snprintf(buf, sizeof buf, "%ldm%02lds", t / 60, t % 60);
  else
    std::snprintf(buf, sizeof buf, "%lds", t);
  return buf;
}

void Progress::skip(uint64_t n) {
  skipped_ += n;
  done_ += n;
}

void Progress::advance(uint64_t n) {
  done_ += n;
  maybe_print(false);
}

std::string Progress::line() const {
  const uint64_t done = done_.load();
  const double elapsed = std::chrono::duration<double>(Clock::now() - start_).count();
  const double fresh = static_cast<double>(done - skipped_.load());
  const double rate = elapsed > 0 ? fresh / elapsed : 0;
  const double frac = total_ ? static_cast<double>(done) / static_cast<double>(total_) : 1.0;
  const double eta = rate > 0 ? static_cast<double>(total_ - std::min(done, total_)) / rate : -1;
  char buf[256];
  std::string bar;
  if (tty_) {
    const int width = 24, filled = static_cast<int>(frac * width);
    bar = "[" + std::string(filled, '#') + std::string(width - filled, '.') + "] ";
  }
  std::string speed;
  if (unit_ == "B" && rate > 0) speed = ", " + amount(rate, unit_) + "/s";
  std::snprintf(buf, sizeof buf, "%s: %s%5.1f%% (%s of %s%s), elapsed %s, ETA %s", label_.c_str(),
                bar.c_str(), 100.0 * frac, amount(static_cast<double>(done), unit_).c_str(),
                amount(static_cast<double>(total_), unit_).c_str(), speed.c_str(),
                format_seconds(elapsed).c_str(), eta < 0 ? "?" : format_seconds(eta).c_str());
  return buf;
}

void Progress::maybe_print(bool force) {
  if (quiet_) return;
  std::unique_lock lock(print_mu_, std::try_to_lock);
  if (!lock.owns_lock() && !force) return;  // another thread is printing
  if (!lock.owns_lock()) lock.lock();
  if (finished_) return;
  const auto now = Clock::now();
  const double since = std::chrono::duration<double>(now - last_print_).count();
  if (!force && since < (tty_ ? kTtyInterval : log_interval_)) return;
  last_print_ = now;
  const std::string l = line();
  if (tty_)
    std::fprintf(stderr, "\r\033[K%s", l.c_str());
  else
    std::fprintf(stderr, "%s\n", as_log_line("progress", l).c_str());
  std::fflush(stderr);
}

void Progress::finish() {
  if (quiet_) return;
  {
    std::lock_guard lock(print_mu_);
    if (finished_) return;
  }
  maybe_print(true);
  std::lock_guard lock(print_mu_);
  if (tty_) std::fprintf(stderr, "\n");
  finished_ = true;
}

}  // namespace k3::base
