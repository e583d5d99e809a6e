// Row-parallel loops: the engine (and bench kernels) open the OpenMP regions,
// kernels take row ranges. Splitting rows never changes a result bit: each row
// is computed by one kernel call, whatever range holds it, so any split gives
// the bits of fn(0, rows) (tests/shared/kernels/parallel_rows_test.cpp).
//
// The rows are cut into chunks that threads take in turn (an atomic counter),
// not into one fixed share per thread, for two costs a fixed share pays in
// full on a small machine:
//  - a woken thread starts late: under OMP_WAIT_POLICY=passive a region's
//    worker wakes tens of microseconds after the master (about 60 us on a
//    VM), and with fixed shares the master then waits for a whole late share;
//  - a core taken away (expertd's buffered-read copies, another process)
//    stalls its thread's share while the other core idles at the barrier.
// When no chunk is left, the master (thread 0) waits for the chunks still
// being computed by spinning, for at most kFinishSpin, before it enters the
// region's closing barrier: arriving there last, it is not put to sleep and
// woken again (the second wake-up a passive region pays). The bound keeps a
// descheduled worker from costing more than that.
#pragma once

#include <omp.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <utility>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace k3::kernels {

// Below this many multiply-adds a region costs more than it saves.
inline constexpr int64_t kMinParallelWork = 1 << 16;
// Chunks per thread: enough that a late or slowed thread costs about one
// chunk, few enough that each chunk still streams (>= kMinChunkWork). A call
// over several tokens pays more per chunk (the batched kernels prepare every
// token's x and start their prefetch stream again in each call), so it is cut
// coarser: on Zen 4, 2 threads, a 3072 x 3584 MXFP4 q8 call of 8 tokens took
// 421 us whole per thread, 424 us in 4 chunks and 477 us in 8.
inline constexpr int64_t kChunksPerThread = 4;
inline constexpr int64_t kBatchedChunksPerThread = 2;
inline constexpr int64_t kMinChunkWork = 1 << 18;
inline constexpr std::chrono::microseconds kFinishSpin{50};

// Rows per chunk for `rows` rows of `work_per_row` multiply-adds over
// `tokens` tokens on `threads` threads: a multiple of 16 rows when chunks are
// at least that tall (the kernels' row groups stay whole), at least 1.
inline int64_t row_chunk(int64_t rows, int64_t work_per_row, int threads, int64_t tokens = 1) {
  const int64_t per_thread = tokens > 1 ? kBatchedChunksPerThread : kChunksPerThread;
  const int64_t by_count = (rows + threads * per_thread - 1) / (threads * per_thread);
  const int64_t by_work = (kMinChunkWork + work_per_row - 1) / std::max<int64_t>(work_per_row, 1);
  int64_t chunk = std::max<int64_t>({by_count, by_work, 1});
  if (chunk > 16) chunk = (chunk + 15) / 16 * 16;
  return std::min(chunk, rows);
}

inline void cpu_relax() {
#if defined(__x86_64__)
  _mm_pause();
#endif
}

// Calls fn(r0, r1) on [0, rows) cut into ranges of `chunk` rows (the last
// shorter), from `threads` threads (0: omp_get_max_threads()) taking them in
// turn.
template <typename F>
void parallel_row_chunks(int64_t rows, int64_t chunk, F&& fn, int threads = 0) {
  if (rows <= 0) return;
  if (threads <= 0) threads = omp_get_max_threads();
  chunk = std::clamp<int64_t>(chunk, 1, rows);
  const int64_t chunks = (rows + chunk - 1) / chunk;
  if (threads == 1 || chunks == 1) {
    fn(int64_t{0}, rows);
    return;
  }
  std::atomic<int64_t> next{0}, done{0};
#pragma omp parallel num_threads(threads)
  {
    for (int64_t c = next.fetch_add(1, std::memory_order_relaxed); c < chunks;
         c = next.fetch_add(1, std::memory_order_relaxed)) {
      fn(c * chunk, std::min(rows, (c + 1) * chunk));
      done.fetch_add(1, std::memory_order_release);
    }
    if (omp_get_thread_num() == 0 && done.load(std::memory_order_acquire) < chunks) {
      const auto deadline = std::chrono::steady_clock::now() + kFinishSpin;
      for (int i = 1; done.load(std::memory_order_acquire) < chunks; ++i) {
        cpu_relax();
        if (i % 64 == 0 && std::chrono::steady_clock::now() > deadline) break;
      }
    }
  }
}

// Calls fn(r0, r1) on disjoint ranges covering [0, rows) of `work_per_row`
// multiply-adds each (over `tokens` tokens), in row_chunk's chunks; small work
// runs on this thread. threads 0: omp_get_max_threads().
template <typename F>
void parallel_rows(int64_t rows, int64_t work_per_row, int64_t tokens, F&& fn, int threads = 0) {
  if (threads <= 0) threads = omp_get_max_threads();
  if (rows * work_per_row < kMinParallelWork || threads == 1 || rows < 2) {
    if (rows > 0) fn(int64_t{0}, rows);
    return;
  }
  parallel_row_chunks(rows, row_chunk(rows, work_per_row, threads, tokens), fn, threads);
}

// One token's rows (a matvec, a per-head loop).
template <typename F>
void parallel_rows(int64_t rows, int64_t work_per_row, F&& fn) {
  parallel_rows(rows, work_per_row, 1, std::forward<F>(fn));
}

}  // namespace k3::kernels
