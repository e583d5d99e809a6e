// The engine's row-parallel matrix product: shared/kernels/parallel_rows.h
// opens the OpenMP regions, kernels take row ranges (any split gives the same
// bits).
#pragma once

#include <cstdint>

#include "shared/kernels/dense.h"
#include "shared/kernels/parallel_rows.h"

namespace k3::engined {

using kernels::parallel_rows;

// Y[t][r] = W[r, :] . X[t][:] for T tokens; X is [T][W.cols()], Y is [T][W.rows()].
inline void linear(const kernels::DenseMatrix& w, const float* x, int64_t T, float* y) {
  parallel_rows(w.rows(), w.cols() * T, T,
                [&](int64_t r0, int64_t r1) { w.matmul(x, w.cols(), T, y, w.rows(), r0, r1); });
}

}  // namespace k3::engined
