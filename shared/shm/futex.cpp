#include "shared/shm/futex.h"

#include <linux/futex.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>

namespace k3::shm {

bool futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int timeout_ms) {
  struct timespec ts;
  struct timespec* tp = nullptr;
  if (timeout_ms >= 0) {
    ts.tv_sec = timeout_ms / 1000;
    ts.tv_nsec = static_cast<long>(timeout_ms % 1000) * 1000000L;
    tp = &ts;
  }
  // Not FUTEX_PRIVATE: the word lives in memory shared between processes.
  long r =
      syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAIT, expected, tp, nullptr, 0);
  return !(r == -1 && errno == ETIMEDOUT);
}

void futex_wake_all(std::atomic<uint32_t>* word) {
  syscall(SYS_futex, reinterpret_cast<uint32_t*>(word), FUTEX_WAKE, INT32_MAX, nullptr, nullptr, 0);
}

uint64_t process_start_time(int pid) {
  if (pid <= 0) return 0;
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  FILE* f = std::fopen(path, "r");
  if (f == nullptr) return 0;
  char buf[1024];
  size_t n = std::fread(buf, 1, sizeof buf - 1, f);
  std::fclose(f);
  buf[n] = '\0';
  // Fields after the command name (which may contain spaces) start after ')'.
  const char* p = std::strrchr(buf, ')');
  if (p == nullptr) return 0;
  // p+2 is field 3 (state); field 22 is 19 fields further.
  p += 2;
  for (int field = 3; field < 22 && *p; ++p)
    if (*p == ' ') ++field;
  return std::strtoull(p, nullptr, 10);
}

bool process_alive(int pid, uint64_t start_time) {
  const uint64_t now = process_start_time(pid);
  if (now == 0) return false;
  // A zombie is dead for our purposes: check the state letter.
  char path[64];
  std::snprintf(path, sizeof path, "/proc/%d/stat", pid);
  if (FILE* f = std::fopen(path, "r")) {
    char buf[512];
    size_t n = std::fread(buf, 1, sizeof buf - 1, f);
    std::fclose(f);
    buf[n] = '\0';
    const char* p = std::strrchr(buf, ')');
    if (p != nullptr && p[1] == ' ' && (p[2] == 'Z' || p[2] == 'X')) return false;
  }
  return start_time == 0 || now == start_time;
}

}  // namespace k3::shm
