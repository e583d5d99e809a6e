// Row-parallel helpers: the engine opens the OpenMP regions, kernels take row
// ranges. Splitting rows never changes a result bit (each row is computed by
// one thread with the same kernel).
#pragma once

#include <omp.h>

#include <cstdint>

#include "shared/kernels/dense.h"

namespace k3::engine {

// Below this many multiply-adds a region costs more than it saves.
inline constexpr int64_t kMinParallelWork = 1 << 16;

// Calls fn(r0, r1) on disjoint ranges covering [0, rows).
template <typename F>
void parallel_rows(int64_t rows, int64_t work_per_row, F&& fn) {
  if (rows * work_per_row < kMinParallelWork || omp_get_max_threads() == 1 || rows < 2) {
    fn(int64_t{0}, rows);
    return;
  }
#pragma omp parallel
  {
    const int64_t n = omp_get_num_threads(), t = omp_get_thread_num();
    const int64_t r0 = rows * t / n, r1 = rows * (t + 1) / n;
    if (r0 < r1) fn(r0, r1);
  }
}

// Y[t][r] = W[r, :] . X[t][:] for T tokens; X is [T][W.cols()], Y is [T][W.rows()].
inline void linear(const kernels::DenseMatrix& w, const float* x, int64_t T, float* y) {
  parallel_rows(w.rows(), w.cols() * T,
                [&](int64_t r0, int64_t r1) { w.matmul(x, w.cols(), T, y, w.rows(), r0, r1); });
}

}  // namespace k3::engine
