#include "engined/model/weight_matrix.h"

#include <algorithm>
#include <cstring>

#include "shared/base/cpu_features.h"

namespace k3::engine {

using namespace kernels;

namespace {
// The AVX2 kernels whenever the machine has more than scalar (an ISA added
// to kernels::DenseMatrix later still finds AVX2 here, never the slow
// scalar loop); the prepared and the load-time forms must pick kernels with
// the same bits (tests/engine/container_test.cpp checks it).
[[maybe_unused]] bool avx2() {
  return kernel_isa() != KernelIsa::kScalar;
}
}  // namespace

WeightMatrix WeightMatrix::prepared(int bits, int64_t rows, int64_t cols, std::vector<uint8_t> data,
                                    std::vector<float> scales) {
  WeightMatrix m;
  m.prepared_ = true;
  m.bits_ = bits;
  m.rows_ = rows;
  m.cols_ = cols;
  m.groups_ = (cols + 63) / 64;
  m.data_ = std::move(data);
  m.scales_ = std::move(scales);
  return m;
}

WeightMatrix WeightMatrix::view(int bits, int64_t rows, int64_t cols, const uint8_t* data,
                                const float* scales, std::shared_ptr<const void> keep) {
  WeightMatrix m = prepared(bits, rows, cols, {}, {});
  m.view_data_ = data;
  m.view_scales_ = scales;
  m.keep_ = std::move(keep);
  return m;
}

size_t WeightMatrix::bytes() const {
  if (!prepared_) return owned_.bytes();
  const size_t r = static_cast<size_t>(rows_), c = static_cast<size_t>(cols_);
  const size_t g = static_cast<size_t>(groups_);
  if (bits_ == 8) return r * c + r * 4;
  if (bits_ == 4) return r * g * 32 + r * g * 4;
  return r * c * 4;
}

// The dispatch below is kernels::DenseMatrix's (shared/kernels/dense.cpp), on
// the prepared arrays.
float WeightMatrix::dot(int64_t r, const float* x) const {
#ifdef K3_HAVE_AVX2_KERNELS
  if (avx2()) {
    if (bits_ == 8) return dot_q8_avx2(q8() + r * cols_, sc()[r], x, cols_);
    if (bits_ == 32) return dot_f32_avx2(f32() + r * cols_, x, cols_);
    return dot_q4g64_avx2(q4() + r * groups_ * 32, sc() + r * groups_, x, cols_);
  }
#endif
  if (bits_ == 8) return dot_q8_scalar(q8() + r * cols_, sc()[r], x, cols_);
  if (bits_ == 32) return dot_f32_scalar(f32() + r * cols_, x, cols_);
  return dot_q4g64_scalar(q4() + r * groups_ * 32, sc() + r * groups_, x, cols_);
}

void WeightMatrix::matvec(const float* x, float* y, int64_t r0, int64_t r1) const {
  if (!prepared_) return owned_.matvec(x, y, r0, r1);
#ifdef K3_HAVE_AVX2_KERNELS
  if (avx2()) {
    if (bits_ == 8) return gemv_q8_avx2(q8(), cols_, sc(), x, cols_, y, r0, r1);
    if (bits_ == 32) return gemv_f32_avx2(f32(), cols_, x, cols_, y, r0, r1);
    thread_local std::vector<float> xp;
    xp.resize(static_cast<size_t>(groups_ * 64));
    prepare_x_q4g64_avx2(x, cols_, xp.data());
    return gemv_q4g64_prepared_avx2(q4(), sc(), xp.data(), cols_, y, r0, r1);
  }
#endif
  for (int64_t r = r0; r < r1; ++r) y[r] = dot(r, x);
}

void WeightMatrix::matmul(const float* X, int64_t ldx, int64_t T, float* Y, int64_t ldy, int64_t r0,
                          int64_t r1) const {
  if (!prepared_) return owned_.matmul(X, ldx, T, Y, ldy, r0, r1);
  if (T == 1) return matvec(X, Y, r0, r1);
#ifdef K3_HAVE_AVX2_KERNELS
  if (avx2()) {
    constexpr int64_t kBlockBytes = 128 << 10, kTokens = 3;
    const int64_t row_bytes = static_cast<int64_t>(bytes()) / std::max<int64_t>(rows_, 1);
    const int64_t block = std::max<int64_t>(1, kBlockBytes / std::max<int64_t>(row_bytes, 1));
    thread_local std::vector<float> xp;
    const int64_t ldxp = groups_ * 64;
    if (bits_ == 4) {
      xp.resize(static_cast<size_t>(T * ldxp));
      for (int64_t t = 0; t < T; ++t)
        prepare_x_q4g64_avx2(X + t * ldx, cols_, xp.data() + t * ldxp);
    }
    for (int64_t b0 = r0; b0 < r1; b0 += block) {
      const int64_t b1 = std::min(r1, b0 + block);
      for (int64_t t = 0; t < T; t += kTokens) {
        const int64_t nt = std::min(kTokens, T - t);
        const float* x = X + t * ldx;
        for (int64_t r = b0; r < b1; ++r) {
          float* y = Y + t * ldy + r;
          if (bits_ == 8)
            dots_q8_avx2(q8() + r * cols_, sc()[r], x, ldx, nt, cols_, y, ldy);
          else if (bits_ == 4)
            dots_q4g64_prepared_avx2(q4() + r * groups_ * 32, sc() + r * groups_,
                                     xp.data() + t * ldxp, ldxp, nt, cols_, y, ldy);
          else
            dots_f32_avx2(f32() + r * cols_, x, ldx, nt, cols_, y, ldy);
        }
      }
    }
    return;
  }
#endif
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t t = 0; t < T; ++t) Y[t * ldy + r] = dot(r, X + t * ldx);
}

void WeightMatrix::row_f32(int64_t r, float* out) const {
  if (!prepared_) return owned_.row_f32(r, out);
  if (bits_ == 32) {
    std::memcpy(out, f32() + r * cols_, static_cast<size_t>(cols_) * sizeof(float));
    return;
  }
  if (bits_ == 8) {
    const int8_t* q = q8() + r * cols_;
    for (int64_t i = 0; i < cols_; ++i) out[i] = static_cast<float>(q[i]) * sc()[r];
    return;
  }
  const uint8_t* q = q4() + r * groups_ * 32;
  for (int64_t i = 0; i < cols_; ++i) {
    const uint8_t b = q[i / 2];
    const int v = ((i & 1) ? (b >> 4) : (b & 15)) - 8;
    out[i] = static_cast<float>(v) * sc()[r * groups_ + i / 64];
  }
}

}  // namespace k3::engine
