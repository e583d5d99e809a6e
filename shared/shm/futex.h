// Futex wait/wake on a 32-bit word in shared memory (across processes).
#pragma once

#include <atomic>
#include <cstdint>

namespace k3::shm {

// Sleeps while *word == expected, at most timeout_ms (< 0: no limit). Returns
// false on timeout. Spurious wake-ups are possible: callers re-check.
bool futex_wait(std::atomic<uint32_t>* word, uint32_t expected, int timeout_ms);
// Wakes every waiter of `word`.
void futex_wake_all(std::atomic<uint32_t>* word);

// Process liveness with a pid-reuse guard: start time is field 22 of
// /proc/PID/stat (0 when the process does not exist).
uint64_t process_start_time(int pid);
bool process_alive(int pid, uint64_t start_time);

}  // namespace k3::shm
