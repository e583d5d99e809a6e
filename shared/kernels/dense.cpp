#include "shared/kernels/dense.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "shared/base/cpu_features.h"
#include "shared/kernels/kernel_scratch.h"

namespace k3::kernels {

float dot_f32_scalar(const float* w, const float* x, int64_t n) {
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) acc += w[i] * x[i];
  return acc;
}

float dot_q8_scalar(const int8_t* w, float scale, const float* x, int64_t n) {
  float acc = 0.0f;
  for (int64_t i = 0; i < n; ++i) acc += static_cast<float>(w[i]) * x[i];
  return acc * scale;
}

float dot_q4g64_scalar(const uint8_t* w, const float* scales, const float* x, int64_t n) {
  float acc = 0.0f;
  for (int64_t g = 0; g * 64 < n; ++g) {
    const int64_t len = std::min<int64_t>(64, n - g * 64);
    float part = 0.0f;
    for (int64_t i = 0; i < len; ++i) {
      const uint8_t b = w[g * 32 + i / 2];
      const int q = ((i & 1) ? (b >> 4) : (b & 15)) - 8;
      part += static_cast<float>(q) * x[g * 64 + i];
    }
    acc += part * scales[g];
  }
  return acc;
}

void quantize_row_q8(const float* src, int64_t n, int8_t* q, float* scale) {
  float amax = 0.0f;
  for (int64_t i = 0; i < n; ++i) amax = std::max(amax, std::fabs(src[i]));
  *scale = amax / 127.0f;
  const float inv = amax > 0.0f ? 127.0f / amax : 0.0f;
  for (int64_t i = 0; i < n; ++i) q[i] = static_cast<int8_t>(std::nearbyint(src[i] * inv));
}

void quantize_row_q4g64(const float* src, int64_t n, uint8_t* q, float* scales) {
  const int64_t groups = (n + 63) / 64;
  std::memset(q, 0x88, static_cast<size_t>(groups * 32));  // padding: q = 0
  for (int64_t g = 0; g < groups; ++g) {
    const int64_t len = std::min<int64_t>(64, n - g * 64);
    float amax = 0.0f;
    for (int64_t i = 0; i < len; ++i) amax = std::max(amax, std::fabs(src[g * 64 + i]));
    scales[g] = amax / 7.0f;
    const float inv = amax > 0.0f ? 7.0f / amax : 0.0f;
    for (int64_t i = 0; i < len; ++i) {
      int v = static_cast<int>(std::nearbyint(src[g * 64 + i] * inv));
      v = std::clamp(v, -7, 7) + 8;
      uint8_t& b = q[g * 32 + i / 2];
      b = (i & 1) ? static_cast<uint8_t>((b & 0x0f) | (v << 4))
                  : static_cast<uint8_t>((b & 0xf0) | v);
    }
  }
}

DenseMatrix::DenseMatrix(int bits, int64_t rows, int64_t cols)
    : bits_(bits == 8 || bits == 4 ? bits : 32),
      rows_(rows),
      cols_(cols),
      groups_((cols + 63) / 64) {
  const size_t r = static_cast<size_t>(rows), c = static_cast<size_t>(cols);
  if (bits_ == 8) {
    data_.resize(r * c);
    scales_.resize(r);
  } else if (bits_ == 4) {
    data_.resize(r * static_cast<size_t>(groups_) * 32);
    scales_.resize(r * static_cast<size_t>(groups_));
  } else {
    data_.resize(r * c * sizeof(float));
  }
}

DenseMatrix DenseMatrix::adopt(int bits, int64_t rows, int64_t cols, std::vector<uint8_t> data,
                               std::vector<float> scales) {
  DenseMatrix m;
  m.bits_ = bits;
  m.rows_ = rows;
  m.cols_ = cols;
  m.groups_ = (cols + 63) / 64;
  m.data_ = std::move(data);
  m.scales_ = std::move(scales);
  return m;
}

DenseMatrix DenseMatrix::view(int bits, int64_t rows, int64_t cols, const uint8_t* data,
                              const float* scales) {
  DenseMatrix m = adopt(bits, rows, cols, {}, {});
  m.view_data_ = data;
  m.view_scales_ = scales;
  return m;
}

void DenseMatrix::set_rows(int64_t r0, int64_t n, const float* src) {
  for (int64_t i = 0; i < n; ++i) {
    const int64_t r = r0 + i;
    const float* s = src + i * cols_;
    if (bits_ == 8)
      quantize_row_q8(s, cols_, reinterpret_cast<int8_t*>(data_.data()) + r * cols_, &scales_[r]);
    else if (bits_ == 4)
      quantize_row_q4g64(s, cols_, data_.data() + r * groups_ * 32, scales_.data() + r * groups_);
    else
      std::memcpy(data_.data() + r * cols_ * sizeof(float), s,
                  static_cast<size_t>(cols_) * sizeof(float));
  }
}

size_t DenseMatrix::bytes_for(int bits, int64_t rows, int64_t cols) {
  const size_t r = static_cast<size_t>(rows), c = static_cast<size_t>(cols);
  const size_t g = static_cast<size_t>((cols + 63) / 64);
  if (bits == 8) return r * c + r * 4;
  if (bits == 4) return r * g * 32 + r * g * 4;
  return r * c * 4;
}

float DenseMatrix::dot(int64_t r, const float* x) const {
  const base::KernelIsa isa = base::kernel_isa();
#ifdef K3_HAVE_AVX512_KERNELS
  if (isa == base::KernelIsa::kAvx512) {
    if (bits_ == 8) return dot_q8_avx512(q8() + r * cols_, sc()[r], x, cols_);
    if (bits_ == 4) return dot_q4g64_avx512(q4() + r * groups_ * 32, sc() + r * groups_, x, cols_);
    return dot_f32_avx512(f32() + r * cols_, x, cols_);
  }
#endif
#ifdef K3_HAVE_AVX2_KERNELS
  if (isa == base::KernelIsa::kAvx2) {
    if (bits_ == 8) return dot_q8_avx2(q8() + r * cols_, sc()[r], x, cols_);
    if (bits_ == 4) return dot_q4g64_avx2(q4() + r * groups_ * 32, sc() + r * groups_, x, cols_);
    return dot_f32_avx2(f32() + r * cols_, x, cols_);
  }
#endif
  (void)isa;
  if (bits_ == 8) return dot_q8_scalar(q8() + r * cols_, sc()[r], x, cols_);
  if (bits_ == 4) return dot_q4g64_scalar(q4() + r * groups_ * 32, sc() + r * groups_, x, cols_);
  return dot_f32_scalar(f32() + r * cols_, x, cols_);
}

namespace {

// From this many tokens a call takes the tiled GEMM (its 6-token register
// tiles and per-row-block decoding pay off); below, the dots_* loop. Both
// give the single dot's bits, so the threshold changes no result.
constexpr int64_t kGemmMinTokens = 6;

// One SIMD level's batched dense kernels (AVX2 or AVX-512: the same API).
struct SimdDense {
  void (*prepare_q4)(const float*, int64_t, float*);
  int64_t q4_prepared_align;  // prepared int4 x: floats rounded up to this
  void (*gemv_f32)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t);
  void (*gemv_q8)(const int8_t*, int64_t, const float*, const float*, int64_t, float*, int64_t,
                  int64_t);
  void (*gemv_q4)(const uint8_t*, const float*, const float*, int64_t, float*, int64_t, int64_t);
  void (*dots_f32)(const float*, const float*, int64_t, int64_t, int64_t, float*, int64_t);
  void (*dots_q8)(const int8_t*, float, const float*, int64_t, int64_t, int64_t, float*, int64_t);
  void (*dots_q4)(const uint8_t*, const float*, const float*, int64_t, int64_t, int64_t, float*,
                  int64_t);
  int64_t tokens;  // tokens per dots_* call sharing the decoded weights
  // Tiled GEMM for calls of at least gemm_tokens tokens (nullptr: none at
  // this level; the dots_* loop serves every call).
  void (*gemm_f32)(const float*, int64_t, const float*, int64_t, int64_t, int64_t, float*, int64_t,
                   int64_t, int64_t);
  void (*gemm_q8)(const int8_t*, int64_t, const float*, const float*, int64_t, int64_t, int64_t,
                  float*, int64_t, int64_t, int64_t);
  void (*gemm_q4)(const uint8_t*, const float*, const float*, int64_t, int64_t, int64_t, float*,
                  int64_t, int64_t, int64_t);
  int64_t gemm_tokens;
};

// The SIMD level in use, or nullptr for scalar.
const SimdDense* simd_dense() {
#ifdef K3_HAVE_AVX512_KERNELS
  static constexpr SimdDense kAvx512{prepare_x_q4g64_avx512,
                                     128,
                                     gemv_f32_avx512,
                                     gemv_q8_avx512,
                                     gemv_q4g64_prepared_avx512,
                                     dots_f32_avx512,
                                     dots_q8_avx512,
                                     dots_q4g64_prepared_avx512,
                                     4,
                                     gemm_f32_avx512,
                                     gemm_q8_avx512,
                                     gemm_q4g64_prepared_avx512,
                                     kGemmMinTokens};
  if (base::kernel_isa() == base::KernelIsa::kAvx512) return &kAvx512;
#endif
#ifdef K3_HAVE_AVX2_KERNELS
  static constexpr SimdDense kAvx2{prepare_x_q4g64_avx2,
                                   64,
                                   gemv_f32_avx2,
                                   gemv_q8_avx2,
                                   gemv_q4g64_prepared_avx2,
                                   dots_f32_avx2,
                                   dots_q8_avx2,
                                   dots_q4g64_prepared_avx2,
                                   3,
                                   nullptr,
                                   nullptr,
                                   nullptr,
                                   0};
  if (base::kernel_isa() == base::KernelIsa::kAvx2) return &kAvx2;
#endif
  return nullptr;
}

}  // namespace

void DenseMatrix::matvec(const float* x, float* y, int64_t r0, int64_t r1) const {
  if (const SimdDense* k = simd_dense()) {
    if (bits_ == 8) return k->gemv_q8(q8(), cols_, sc(), x, cols_, y, r0, r1);
    if (bits_ == 32) return k->gemv_f32(f32(), cols_, x, cols_, y, r0, r1);
    // int4: x permuted once for all rows (the same prepared x as matmul's).
    // 64-byte aligned: every 64-byte load of it stays within one cache line.
    const int64_t a = k->q4_prepared_align;
    auto* xp = static_cast<float*>(
        t_scratch.get(static_cast<size_t>((groups_ * 64 + a - 1) / a * a) * sizeof(float)));
    k->prepare_q4(x, cols_, xp);
    return k->gemv_q4(q4(), sc(), xp, cols_, y, r0, r1);
  }
  for (int64_t r = r0; r < r1; ++r) y[r] = dot(r, x);
}

void DenseMatrix::matmul(const float* X, int64_t ldx, int64_t T, float* Y, int64_t ldy, int64_t r0,
                         int64_t r1) const {
  if (T == 1) return matvec(X, Y, r0, r1);  // the decode step: the streaming kernels
  if (const SimdDense* k = simd_dense()) {
    // Blocks of rows (~128 KiB of weights) stream from RAM once and stay in L2
    // while the tokens pass over them, k->tokens at a time sharing the decoded
    // weights (dots_* give each token the bits of dot(), i.e. of matvec()).
    constexpr int64_t kBlockBytes = 128 << 10;
    const int64_t kTokens = k->tokens;
    const int64_t row_bytes = static_cast<int64_t>(bytes()) / std::max<int64_t>(rows_, 1);
    const int64_t block = std::max<int64_t>(1, kBlockBytes / std::max<int64_t>(row_bytes, 1));
    // int4: every token's x permuted once (as matvec does).
    float* xp = nullptr;  // 64-byte aligned (t_scratch): loads stay within cache lines
    const int64_t a = k->q4_prepared_align;
    const int64_t ldxp = (groups_ * 64 + a - 1) / a * a;
    if (bits_ == 4) {
      xp = static_cast<float*>(t_scratch.get(static_cast<size_t>(T * ldxp) * sizeof(float)));
      for (int64_t t = 0; t < T; ++t) k->prepare_q4(X + t * ldx, cols_, xp + t * ldxp);
    }
    if (k->gemm_f32 != nullptr && T >= k->gemm_tokens) {
      if (bits_ == 8) return k->gemm_q8(q8(), cols_, sc(), X, ldx, T, cols_, Y, ldy, r0, r1);
      if (bits_ == 4) return k->gemm_q4(q4(), sc(), xp, ldxp, T, cols_, Y, ldy, r0, r1);
      return k->gemm_f32(f32(), cols_, X, ldx, T, cols_, Y, ldy, r0, r1);
    }
    for (int64_t b0 = r0; b0 < r1; b0 += block) {
      const int64_t b1 = std::min(r1, b0 + block);
      for (int64_t t = 0; t < T; t += kTokens) {
        const int64_t nt = std::min(kTokens, T - t);
        const float* x = X + t * ldx;
        for (int64_t r = b0; r < b1; ++r) {
          float* y = Y + t * ldy + r;
          if (bits_ == 8)
            k->dots_q8(q8() + r * cols_, sc()[r], x, ldx, nt, cols_, y, ldy);
          else if (bits_ == 4)
            k->dots_q4(q4() + r * groups_ * 32, sc() + r * groups_, xp + t * ldxp, ldxp, nt, cols_,
                       y, ldy);
          else
            k->dots_f32(f32() + r * cols_, x, ldx, nt, cols_, y, ldy);
        }
      }
    }
    return;
  }
  // Row-outer: each weight row streams from RAM once per call and serves all T
  // tokens from cache.
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t t = 0; t < T; ++t) Y[t * ldy + r] = dot(r, X + t * ldx);
}

void DenseMatrix::row_f32(int64_t r, float* out) const {
  if (bits_ == 8) {
    for (int64_t i = 0; i < cols_; ++i) out[i] = static_cast<float>(q8()[r * cols_ + i]) * sc()[r];
  } else if (bits_ == 4) {
    const uint8_t* q = q4() + r * groups_ * 32;
    for (int64_t i = 0; i < cols_; ++i) {
      const uint8_t b = q[i / 2];
      const int v = ((i & 1) ? (b >> 4) : (b & 15)) - 8;
      out[i] = static_cast<float>(v) * sc()[r * groups_ + i / 64];
    }
  } else {
    std::memcpy(out, f32() + r * cols_, static_cast<size_t>(cols_) * sizeof(float));
  }
}

}  // namespace k3::kernels
