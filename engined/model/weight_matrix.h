// A dense weight matrix as the engine holds it: either a kernels::DenseMatrix
// quantized at load (the source checkpoint), or int8 / int4 data and scales
// prepared by `k3ctl repack` (shared/checkpoint/container.h) and taken as they
// are stored. The prepared form calls the same kernels of shared/kernels/dense.h
// with the same arguments DenseMatrix does, so a matrix gives the same bits
// whichever way it was made (engined/model/weights.cpp's container test).
#pragma once

#include <cstdint>
#include <vector>

#include "engined/model/parallel.h"
#include "shared/kernels/dense.h"

namespace k3::engine {

// Not thread-safe to mutate; const methods are thread-safe.
class WeightMatrix {
 public:
  WeightMatrix() = default;
  explicit WeightMatrix(kernels::DenseMatrix m) : owned_(std::move(m)) {}
  // Prepared int8 ([rows * cols] data, [rows] scales) or int4 ([rows * groups
  // * 32] data, [rows * groups] scales; groups = (cols + 63) / 64).
  static WeightMatrix prepared(int bits, int64_t rows, int64_t cols, std::vector<uint8_t> data,
                               std::vector<float> scales);

  int bits() const { return prepared_ ? bits_ : owned_.bits(); }
  int64_t rows() const { return prepared_ ? rows_ : owned_.rows(); }
  int64_t cols() const { return prepared_ ? cols_ : owned_.cols(); }
  size_t bytes() const;
  bool is_prepared() const { return prepared_; }

  // As kernels::DenseMatrix.
  void matvec(const float* x, float* y, int64_t r0, int64_t r1) const;
  void matmul(const float* X, int64_t ldx, int64_t T, float* Y, int64_t ldy, int64_t r0,
              int64_t r1) const;
  void row_f32(int64_t r, float* out) const;

 private:
  float dot(int64_t r, const float* x) const;
  const int8_t* q8() const { return reinterpret_cast<const int8_t*>(data_.data()); }
  const uint8_t* q4() const { return data_.data(); }

  kernels::DenseMatrix owned_;
  bool prepared_ = false;
  int bits_ = 32;
  int64_t rows_ = 0, cols_ = 0, groups_ = 0;
  std::vector<uint8_t> data_;
  std::vector<float> scales_;
};

// Y[t][r] = W[r, :] . X[t][:] for T tokens (parallel.h's linear for this type).
inline void linear(const WeightMatrix& w, const float* x, int64_t T, float* y) {
  parallel_rows(w.rows(), w.cols() * T,
                [&](int64_t r0, int64_t r1) { w.matmul(x, w.cols(), T, y, w.rows(), r0, r1); });
}

}  // namespace k3::engine
