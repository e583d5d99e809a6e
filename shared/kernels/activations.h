// The model's activation functions (K3_MODEL.md notation), shared by the
// dense stack (engined/model) and the routed experts
// (shared/experts/expert_compute.h) so both compute the same bits.
//
// SiTU is a kernel with a defined arithmetic, the same bits in every variant
// whatever its SIMD width: each element is computed in double,
//   v = ((b1 tanh(g / b1)) sigma(g)) (b2 tanh(u / b2)), x / b as x * (1 / b),
// with exp(x) = p(r) 2^n (x clamped to [-700, 700], n = x log2(e) rounded to
// nearest even, r = (x - n ln2_hi) - n ln2_lo, p the degree-11 Taylor
// polynomial of e^r in Horner form), tanh(y) = sign(y) (1 - 2 / (exp(2 |y|) + 1))
// (|y| clamped to 20; |y| itself below 2^-20), sigma(g) = 1 / (1 + exp(-g)),
// each a multiply, add, subtract or divide in double (never fused), then
// rounded to float once; a NaN g or u gives NaN. Its error is within a float
// ulp of the exact function (activations_test.cpp). The scalar variant is the
// reference; AVX2 and AVX-512 variants (files built with -ffp-contract=off)
// give its bits; situ_rows picks the one of base::kernel_isa(). It replaced
// per-element calls to libm's tanhf, expm1f and expf, which had been 8 % of a
// long prompt's time (perf, the 896-expert slice).
#pragma once

#include <cmath>
#include <cstdint>

namespace k3::kernels {

inline float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
inline float silu(float x) {
  return x * sigmoid(x);
}

// out[i] = SiTU(g[i], u[i]) with betas b1, b2 (> 0), i < n; out may be g.
void situ_rows(const float* g, const float* u, int64_t n, float b1, float b2, float* out);

// One element, the scalar reference.
float situ(float g, float u, float b1, float b2);

// The variants (tests call each one the machine can run).
void situ_rows_scalar(const float* g, const float* u, int64_t n, float b1, float b2, float* out);
void situ_rows_avx2(const float* g, const float* u, int64_t n, float b1, float b2, float* out);
void situ_rows_avx512(const float* g, const float* u, int64_t n, float b1, float b2, float* out);

}  // namespace k3::kernels
