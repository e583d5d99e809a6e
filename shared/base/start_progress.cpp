#include "shared/base/start_progress.h"

#include <sys/resource.h>

#include <cstdlib>
#include <fstream>

#include "shared/base/log.h"
#include "shared/base/progress.h"
#include "shared/base/service_notify.h"

namespace k3::base {
namespace {
// Bytes read through read calls in a tick that count as progress.
constexpr uint64_t kMinReadChars = 64 << 10;
}  // namespace

StartProgress::StartProgress(std::string phase) : StartProgress(std::move(phase), Options()) {}

StartProgress::StartProgress(std::string phase, Options options)
    : opt_(options), start_(std::chrono::steady_clock::now()), phase_(std::move(phase)) {
  const char* env = std::getenv("NOTIFY_SOCKET");
  if (env == nullptr || *env == '\0') return;
  {
    std::lock_guard<std::mutex> lk(mu_);
    if (auto s = notify_status(status_locked()); !s.ok()) logger("service")->warn("{}", msg(s));
  }
  thread_ = std::thread([this] { run(); });
}

StartProgress::~StartProgress() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void StartProgress::phase(std::string what) {
  std::lock_guard<std::mutex> lk(mu_);
  phase_ = std::move(what);
  if (thread_.joinable()) (void)notify_status(status_locked());
}

int StartProgress::extensions() const {
  std::lock_guard<std::mutex> lk(mu_);
  return extensions_;
}

std::string StartProgress::status_locked() const {
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  return phase_ + " (" + Progress::format_seconds(s) + ")";
}

StartProgress::Sample StartProgress::sample() {
  Sample out;
  rusage ru{};
  if (::getrusage(RUSAGE_SELF, &ru) == 0)
    out.cpu_seconds = static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
                      static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
  // Bytes this process read: from block devices (read_bytes: a load waiting
  // on a drive progresses) and through read calls (rchar: a network file
  // system; reading /proc/self/io itself adds a few hundred bytes a tick,
  // below kMinReadChars).
  std::ifstream io("/proc/self/io");
  std::string key;
  uint64_t value = 0;
  while (io >> key >> value) {
    if (key == "read_bytes:") out.read_bytes = value;
    if (key == "rchar:") out.read_chars = value;
  }
  return out;
}

void StartProgress::run() {
  Sample last = sample();
  std::unique_lock<std::mutex> lk(mu_);
  for (;;) {
    cv_.wait_for(lk, std::chrono::duration<double>(opt_.tick_seconds), [&] { return stop_; });
    if (stop_) return;
    const Sample now = sample();
    const bool progressed =
        now.cpu_seconds - last.cpu_seconds >= opt_.min_cpu_share * opt_.tick_seconds ||
        now.read_bytes > last.read_bytes || now.read_chars >= last.read_chars + kMinReadChars;
    last = now;
    if (!progressed) continue;  // stalled: the start timeout runs on
    if (auto s = notify_extend_timeout(opt_.extend_seconds, status_locked()); s.ok()) ++extensions_;
  }
}

}  // namespace k3::base
