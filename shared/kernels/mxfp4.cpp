#include "shared/kernels/mxfp4.h"

#include <bit>
#include <cmath>
#include <limits>

#include "shared/base/cpu_features.h"

namespace k3::kernels {

const float kE2m1Values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                               -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};
const int8_t kE2m1Doubled[16] = {0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12};

namespace {
constexpr Ue8m0Table make_ue8m0_table() {
  Ue8m0Table t{};
  for (uint32_t s = 0; s < 256; ++s) {
    // 2^(s-127) has biased exponent s; s = 0 is the subnormal 2^-127.
    const uint32_t bits = s == 0 ? 0x00400000u : s == 255 ? 0x7fc00000u : s << 23;
    t.v[s] = std::bit_cast<float>(bits);
  }
  return t;
}
}  // namespace

constinit const Ue8m0Table kUe8m0Scale = make_ue8m0_table();

void quantize_q8_32(const float* x, int64_t n, int8_t* q, float* scales) {
  for (int64_t g = 0; g < n / 32; ++g) {
    const float* xg = x + 32 * g;
    float amax = 0.0f;
    for (int i = 0; i < 32; ++i) amax = std::fmax(amax, std::fabs(xg[i]));
    const float scale = amax / 127.0f;
    scales[g] = scale;
    const float inv = scale > 0.0f ? 1.0f / scale : 0.0f;
    // Finite groups round into [-127, 127]; a NaN or infinite input (whose
    // group scale is then non-finite, so its rows come out non-finite and
    // are refused downstream) gives 0 rather than an out-of-range cast.
    for (int i = 0; i < 32; ++i) {
      const float v = std::nearbyint(xg[i] * inv);
      q[32 * g + i] = v >= -127.0f && v <= 127.0f ? static_cast<int8_t>(v) : int8_t{0};
    }
  }
}

bool mxfp4_matmul_trivial(const Mxfp4Matrix& w, int64_t n, float* Y, int64_t ldy, int64_t r0,
                          int64_t r1) {
  if (n <= 0) return true;
  if (w.cols / 32 > 0) return false;
  for (int64_t t = 0; t < n; ++t)
    for (int64_t r = r0; r < r1; ++r) Y[t * ldy + r] = 0.0f;
  return true;
}

void mxfp4_matvec_f32_scalar(const Mxfp4Matrix& w, const float* x, float* y, int64_t r0,
                             int64_t r1) {
  const int64_t groups = w.cols / 32;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* p = w.packed + r * (w.cols / 2);
    const uint8_t* s = w.scales + r * groups;
    float acc = 0.0f;
    for (int64_t g = 0; g < groups; ++g) {
      float part = 0.0f;
      for (int i = 0; i < 16; ++i) {
        const uint8_t b = p[16 * g + i];
        part +=
            kE2m1Values[b & 15] * x[32 * g + 2 * i] + kE2m1Values[b >> 4] * x[32 * g + 2 * i + 1];
      }
      acc += part * kUe8m0Scale.v[s[g]];
    }
    y[r] = acc;
  }
}

void mxfp4_matvec_q8_scalar(const Mxfp4Matrix& w, const int8_t* xq, const float* xs, float* y,
                            int64_t r0, int64_t r1) {
  const int64_t groups = w.cols / 32;
  for (int64_t r = r0; r < r1; ++r) {
    const uint8_t* p = w.packed + r * (w.cols / 2);
    const uint8_t* s = w.scales + r * groups;
    float acc = 0.0f;
    for (int64_t g = 0; g < groups; ++g) {
      int32_t dot = 0;
      for (int i = 0; i < 16; ++i) {
        const uint8_t b = p[16 * g + i];
        dot += kE2m1Doubled[b & 15] * xq[32 * g + 2 * i] +
               kE2m1Doubled[b >> 4] * xq[32 * g + 2 * i + 1];
      }
      acc += static_cast<float>(dot) * (kUe8m0Scale.v[s[g]] * 0.5f * xs[g]);
    }
    y[r] = acc;
  }
}

void mxfp4_matmul_q8_scalar(const Mxfp4Matrix& w, const int8_t* Xq, int64_t ldxq, const float* Xs,
                            int64_t ldxs, int64_t n, float* Y, int64_t ldy, int64_t r0,
                            int64_t r1) {
  // Row-outer: each row is read once for all tokens; each (row, token) is the
  // matvec's computation of that row.
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t t = 0; t < n; ++t)
      mxfp4_matvec_q8_scalar(w, Xq + t * ldxq, Xs + t * ldxs, Y + t * ldy, r, r + 1);
}

void mxfp4_matmul_f32_scalar(const Mxfp4Matrix& w, const float* X, int64_t ldx, int64_t n, float* Y,
                             int64_t ldy, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r)
    for (int64_t t = 0; t < n; ++t) mxfp4_matvec_f32_scalar(w, X + t * ldx, Y + t * ldy, r, r + 1);
}

void mxfp4_matvec_f32(const Mxfp4Matrix& w, const float* x, float* y, int64_t r0, int64_t r1) {
#ifdef K3_HAVE_AVX512_KERNELS
  if (base::kernel_isa() == base::KernelIsa::kAvx512)
    return mxfp4_matvec_f32_avx512(w, x, y, r0, r1);
#endif
#ifdef K3_HAVE_AVX2_KERNELS
  if (base::kernel_isa() == base::KernelIsa::kAvx2) return mxfp4_matvec_f32_avx2(w, x, y, r0, r1);
#endif
  mxfp4_matvec_f32_scalar(w, x, y, r0, r1);
}

void mxfp4_matvec_q8(const Mxfp4Matrix& w, const int8_t* xq, const float* xs, float* y, int64_t r0,
                     int64_t r1) {
#ifdef K3_HAVE_AVX512_KERNELS
  if (base::kernel_isa() == base::KernelIsa::kAvx512)
    return mxfp4_matvec_q8_avx512(w, xq, xs, y, r0, r1);
#endif
#ifdef K3_HAVE_AVX2_KERNELS
  if (base::kernel_isa() == base::KernelIsa::kAvx2)
    return mxfp4_matvec_q8_avx2(w, xq, xs, y, r0, r1);
#endif
  mxfp4_matvec_q8_scalar(w, xq, xs, y, r0, r1);
}

void mxfp4_matmul_q8(const Mxfp4Matrix& w, const int8_t* Xq, int64_t ldxq, const float* Xs,
                     int64_t ldxs, int64_t n, float* Y, int64_t ldy, int64_t r0, int64_t r1) {
#ifdef K3_HAVE_AVX512_KERNELS
  if (base::kernel_isa() == base::KernelIsa::kAvx512)
    return mxfp4_matmul_q8_avx512(w, Xq, ldxq, Xs, ldxs, n, Y, ldy, r0, r1);
#endif
#ifdef K3_HAVE_AVX2_KERNELS
  if (base::kernel_isa() == base::KernelIsa::kAvx2)
    return mxfp4_matmul_q8_avx2(w, Xq, ldxq, Xs, ldxs, n, Y, ldy, r0, r1);
#endif
  mxfp4_matmul_q8_scalar(w, Xq, ldxq, Xs, ldxs, n, Y, ldy, r0, r1);
}

void mxfp4_matmul_f32(const Mxfp4Matrix& w, const float* X, int64_t ldx, int64_t n, float* Y,
                      int64_t ldy, int64_t r0, int64_t r1) {
#ifdef K3_HAVE_AVX512_KERNELS
  if (base::kernel_isa() == base::KernelIsa::kAvx512)
    return mxfp4_matmul_f32_avx512(w, X, ldx, n, Y, ldy, r0, r1);
#endif
#ifdef K3_HAVE_AVX2_KERNELS
  if (base::kernel_isa() == base::KernelIsa::kAvx2)
    return mxfp4_matmul_f32_avx2(w, X, ldx, n, Y, ldy, r0, r1);
#endif
  mxfp4_matmul_f32_scalar(w, X, ldx, n, Y, ldy, r0, r1);
}

}  // namespace k3::kernels
