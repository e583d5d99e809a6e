// SiTU, AVX2 (shared/kernels/activations.h): 4 doubles per vector, the
// scalar reference's operations in its order (built with -ffp-contract=off).
// Like every *_avx2.cpp file, it calls no inline or template code from shared
// headers, only intrinsics, plain C++ and its own file-local helpers.
#include <immintrin.h>

#include <cstdint>

#include "shared/kernels/situ_constants.h"

namespace k3::kernels {
namespace {

using namespace situ_constants;

[[gnu::always_inline]] inline __m256d exp_v(__m256d x) {
  // max/min with the constant second: a NaN lane (excluded by the caller)
  // would take the constant.
  x = _mm256_max_pd(x, _mm256_set1_pd(-kExpMax));
  x = _mm256_min_pd(x, _mm256_set1_pd(kExpMax));
  const __m256d t = _mm256_add_pd(_mm256_mul_pd(x, _mm256_set1_pd(kLog2e)), _mm256_set1_pd(kRound));
  const __m256d n = _mm256_sub_pd(t, _mm256_set1_pd(kRound));
  const __m256d r = _mm256_sub_pd(_mm256_sub_pd(x, _mm256_mul_pd(n, _mm256_set1_pd(kLn2Hi))),
                                  _mm256_mul_pd(n, _mm256_set1_pd(kLn2Lo)));
  __m256d p = _mm256_set1_pd(kInvFact[11]);
  for (int k = 10; k >= 0; --k) p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(kInvFact[k]));
  const __m256i e = _mm256_slli_epi64(
      _mm256_add_epi64(_mm256_sub_epi64(_mm256_castpd_si256(t),
                                        _mm256_set1_epi64x(static_cast<int64_t>(kRoundBits))),
                       _mm256_set1_epi64x(1023)),
      52);
  return _mm256_mul_pd(p, _mm256_castsi256_pd(e));
}

[[gnu::always_inline]] inline __m256d tanh_v(__m256d y) {
  const __m256d sign = _mm256_set1_pd(-0.0);
  __m256d a = _mm256_andnot_pd(sign, y);
  a = _mm256_min_pd(a, _mm256_set1_pd(kTanhMax));
  const __m256d one = _mm256_set1_pd(1.0);
  const __m256d big = _mm256_sub_pd(
      one, _mm256_div_pd(_mm256_set1_pd(2.0), _mm256_add_pd(exp_v(_mm256_add_pd(a, a)), one)));
  const __m256d tiny = _mm256_cmp_pd(a, _mm256_set1_pd(kTanhTiny), _CMP_LT_OQ);
  const __m256d t = _mm256_blendv_pd(big, a, tiny);
  return _mm256_or_pd(t, _mm256_and_pd(sign, y));
}

// Four elements in double.
[[gnu::always_inline]] inline __m256d situ_v(__m256d g, __m256d u, __m256d B1, __m256d B2,
                                             __m256d i1, __m256d i2) {
  const __m256d one = _mm256_set1_pd(1.0);
  const __m256d neg_g = _mm256_xor_pd(g, _mm256_set1_pd(-0.0));
  const __m256d sig = _mm256_div_pd(one, _mm256_add_pd(one, exp_v(neg_g)));
  const __m256d tg = _mm256_mul_pd(B1, tanh_v(_mm256_mul_pd(g, i1)));
  const __m256d tu = _mm256_mul_pd(B2, tanh_v(_mm256_mul_pd(u, i2)));
  return _mm256_mul_pd(_mm256_mul_pd(tg, sig), tu);
}

}  // namespace

void situ_rows_avx2(const float* g, const float* u, int64_t n, float b1, float b2, float* out) {
  const double B1d = b1, B2d = b2;
  const __m256d B1 = _mm256_set1_pd(B1d), B2 = _mm256_set1_pd(B2d);
  const __m256d i1 = _mm256_set1_pd(1.0 / B1d), i2 = _mm256_set1_pd(1.0 / B2d);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gf = _mm256_loadu_ps(g + i);
    const __m256 uf = _mm256_loadu_ps(u + i);
    const __m256d lo = situ_v(_mm256_cvtps_pd(_mm256_castps256_ps128(gf)),
                              _mm256_cvtps_pd(_mm256_castps256_ps128(uf)), B1, B2, i1, i2);
    const __m256d hi = situ_v(_mm256_cvtps_pd(_mm256_extractf128_ps(gf, 1)),
                              _mm256_cvtps_pd(_mm256_extractf128_ps(uf, 1)), B1, B2, i1, i2);
    __m256 v =
        _mm256_insertf128_ps(_mm256_castps128_ps256(_mm256_cvtpd_ps(lo)), _mm256_cvtpd_ps(hi), 1);
    // A NaN g or u: g + u (a NaN).
    const __m256 nan = _mm256_cmp_ps(gf, uf, _CMP_UNORD_Q);
    v = _mm256_blendv_ps(v, _mm256_add_ps(gf, uf), nan);
    _mm256_storeu_ps(out + i, v);
  }
  // The tail through a zero-padded block of 8.
  if (i < n) {
    float gb[8] = {}, ub[8] = {}, ob[8];
    for (int64_t k = 0; k < n - i; ++k) {
      gb[k] = g[i + k];
      ub[k] = u[i + k];
    }
    situ_rows_avx2(gb, ub, 8, b1, b2, ob);
    for (int64_t k = 0; k < n - i; ++k) out[i + k] = ob[k];
  }
}

}  // namespace k3::kernels
