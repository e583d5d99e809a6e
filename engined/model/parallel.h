// The engine's row-parallel matrix product: shared/kernels/parallel_rows.h
// opens the OpenMP regions, kernels take row ranges (any split gives the same
// bits).
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>

#include "shared/kernels/dense.h"
#include "shared/kernels/parallel_rows.h"

namespace k3::engined {

using kernels::parallel_rows;

// Wall time spent inside the engine's dense matrix products (linear()),
// process-wide, in nanoseconds: bench prefill's gemm_share.
inline std::atomic<int64_t>& matmul_nanoseconds() {
  static std::atomic<int64_t> ns{0};
  return ns;
}
inline double matmul_seconds() {
  return static_cast<double>(matmul_nanoseconds().load(std::memory_order_relaxed)) * 1e-9;
}

// Times one matrix product into matmul_nanoseconds().
class MatmulTimer {
 public:
  MatmulTimer() : t0_(std::chrono::steady_clock::now()) {}
  ~MatmulTimer() {
    matmul_nanoseconds().fetch_add(
        std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - t0_)
            .count(),
        std::memory_order_relaxed);
  }
  MatmulTimer(const MatmulTimer&) = delete;
  MatmulTimer& operator=(const MatmulTimer&) = delete;

 private:
  std::chrono::steady_clock::time_point t0_;
};

// Y[t][r] = W[r, :] . X[t][:] for T tokens; X is [T][W.cols()], Y is [T][W.rows()].
inline void linear(const kernels::DenseMatrix& w, const float* x, int64_t T, float* y) {
  const MatmulTimer timer;
  parallel_rows(w.rows(), w.cols() * T, T,
                [&](int64_t r0, int64_t r1) { w.matmul(x, w.cols(), T, y, w.rows(), r0, r1); });
}

}  // namespace k3::engined
