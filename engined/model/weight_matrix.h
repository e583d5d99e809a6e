// A dense weight matrix as the engine holds it: either a kernels::DenseMatrix
// quantized at load (the source checkpoint), or f32 / int8 / int4 data and
// scales prepared by `k3ctl repack` (shared/checkpoint/container.h) and taken
// as they are stored: adopted by the matrix, or (--mmap) viewed where a
// read-only mapping of the container holds them. Every form is a
// kernels::DenseMatrix, so the same kernels give the same bits whichever way
// the matrix was made (tests/shared/checkpoint/container_test.cpp).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engined/model/parallel.h"
#include "shared/kernels/dense.h"

namespace k3::engined {

// Not thread-safe to mutate; const methods are thread-safe.
class WeightMatrix {
 public:
  WeightMatrix() = default;
  explicit WeightMatrix(kernels::DenseMatrix m) : m_(std::move(m)) {}
  // Prepared int8 ([rows * cols] data, [rows] scales) or int4 ([rows * groups
  // * 32] data, [rows * groups] scales; groups = (cols + 63) / 64).
  static WeightMatrix prepared(int bits, int64_t rows, int64_t cols, std::vector<uint8_t> data,
                               std::vector<float> scales);
  // The same layouts (bits 32: f32 [rows * cols], no scales) held elsewhere:
  // not copied; `keep` keeps their storage (a mapping) alive. `scales` must
  // be 4-byte aligned, and `data` too for f32.
  static WeightMatrix view(int bits, int64_t rows, int64_t cols, const uint8_t* data,
                           const float* scales, std::shared_ptr<const void> keep);

  int bits() const { return m_.bits(); }
  int64_t rows() const { return m_.rows(); }
  int64_t cols() const { return m_.cols(); }
  size_t bytes() const { return m_.bytes(); }
  bool is_prepared() const { return prepared_; }
  bool is_view() const { return m_.is_view(); }

  // As kernels::DenseMatrix (whose kernels and dispatch run in every form).
  void matvec(const float* x, float* y, int64_t r0, int64_t r1) const { m_.matvec(x, y, r0, r1); }
  void matmul(const float* X, int64_t ldx, int64_t T, float* Y, int64_t ldy, int64_t r0,
              int64_t r1) const {
    m_.matmul(X, ldx, T, Y, ldy, r0, r1);
  }
  void row_f32(int64_t r, float* out) const { m_.row_f32(r, out); }

 private:
  kernels::DenseMatrix m_;
  bool prepared_ = false;
  std::shared_ptr<const void> keep_;  // a view's storage
};

// Y[t][r] = W[r, :] . X[t][:] for T tokens (parallel.h's linear for this type).
inline void linear(const WeightMatrix& w, const float* x, int64_t T, float* y) {
  const MatmulTimer timer;
  parallel_rows(w.rows(), w.cols() * T, T,
                [&](int64_t r0, int64_t r1) { w.matmul(x, w.cols(), T, y, w.rows(), r0, r1); });
}

}  // namespace k3::engined
