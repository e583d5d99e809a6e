// A dense weight matrix as the engine holds it: either a kernels::DenseMatrix
// quantized at load (the source checkpoint), or f32 / int8 / int4 data and
// scales prepared by `k3ctl repack` (shared/checkpoint/container.h) and taken
// as they are stored: copied into the matrix, or (--mmap) viewed where a
// read-only mapping of the container holds them. The prepared form calls the same kernels of
// shared/kernels/dense.h with the same arguments DenseMatrix does, so a matrix gives the same bits
// whichever way it was made (engined/model/weights.cpp's container test).
#pragma once

#include <cstdint>
#include <memory>
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
  // The same layouts (bits 32: f32 [rows * cols], no scales) held elsewhere:
  // not copied; `keep` keeps their storage (a mapping) alive. `scales` must
  // be 4-byte aligned, and `data` too for f32.
  static WeightMatrix view(int bits, int64_t rows, int64_t cols, const uint8_t* data,
                           const float* scales, std::shared_ptr<const void> keep);

  int bits() const { return prepared_ ? bits_ : owned_.bits(); }
  int64_t rows() const { return prepared_ ? rows_ : owned_.rows(); }
  int64_t cols() const { return prepared_ ? cols_ : owned_.cols(); }
  size_t bytes() const;
  bool is_prepared() const { return prepared_; }
  bool is_view() const { return view_data_ != nullptr; }

  // As kernels::DenseMatrix.
  void matvec(const float* x, float* y, int64_t r0, int64_t r1) const;
  void matmul(const float* X, int64_t ldx, int64_t T, float* Y, int64_t ldy, int64_t r0,
              int64_t r1) const;
  void row_f32(int64_t r, float* out) const;

 private:
  float dot(int64_t r, const float* x) const;
  const uint8_t* raw() const { return view_data_ != nullptr ? view_data_ : data_.data(); }
  const int8_t* q8() const { return reinterpret_cast<const int8_t*>(raw()); }
  const uint8_t* q4() const { return raw(); }
  const float* f32() const { return reinterpret_cast<const float*>(raw()); }
  const float* sc() const { return view_data_ != nullptr ? view_scales_ : scales_.data(); }

  kernels::DenseMatrix owned_;
  bool prepared_ = false;
  int bits_ = 32;
  int64_t rows_ = 0, cols_ = 0, groups_ = 0;
  std::vector<uint8_t> data_;
  std::vector<float> scales_;
  const uint8_t* view_data_ = nullptr;
  const float* view_scales_ = nullptr;
  std::shared_ptr<const void> keep_;
};

// Y[t][r] = W[r, :] . X[t][:] for T tokens (parallel.h's linear for this type).
inline void linear(const WeightMatrix& w, const float* x, int64_t T, float* y) {
  parallel_rows(w.rows(), w.cols() * T,
                [&](int64_t r0, int64_t r1) { w.matmul(x, w.cols(), T, y, w.rows(), r0, r1); });
}

}  // namespace k3::engine
