// SiTU, AVX-512 (shared/kernels/activations.h): 8 doubles per vector, the
// scalar reference's operations in its order (built with -ffp-contract=off).
// Like every *_avx512.cpp file, it calls no inline or template code from
// shared headers, only intrinsics, plain C++ and its own file-local helpers.
#include <immintrin.h>

#include <cstdint>

#include "shared/kernels/situ_constants.h"

namespace k3::kernels {
namespace {

using namespace situ_constants;

[[gnu::always_inline]] inline __m512d exp_v(__m512d x) {
  x = _mm512_max_pd(x, _mm512_set1_pd(-kExpMax));
  x = _mm512_min_pd(x, _mm512_set1_pd(kExpMax));
  const __m512d t = _mm512_add_pd(_mm512_mul_pd(x, _mm512_set1_pd(kLog2e)), _mm512_set1_pd(kRound));
  const __m512d n = _mm512_sub_pd(t, _mm512_set1_pd(kRound));
  const __m512d r = _mm512_sub_pd(_mm512_sub_pd(x, _mm512_mul_pd(n, _mm512_set1_pd(kLn2Hi))),
                                  _mm512_mul_pd(n, _mm512_set1_pd(kLn2Lo)));
  __m512d p = _mm512_set1_pd(kInvFact[11]);
  for (int k = 10; k >= 0; --k) p = _mm512_add_pd(_mm512_mul_pd(p, r), _mm512_set1_pd(kInvFact[k]));
  const __m512i e = _mm512_slli_epi64(
      _mm512_add_epi64(_mm512_sub_epi64(_mm512_castpd_si512(t),
                                        _mm512_set1_epi64(static_cast<int64_t>(kRoundBits))),
                       _mm512_set1_epi64(1023)),
      52);
  return _mm512_mul_pd(p, _mm512_castsi512_pd(e));
}

[[gnu::always_inline]] inline __m512d tanh_v(__m512d y) {
  const __m512i sign = _mm512_set1_epi64(static_cast<int64_t>(0x8000000000000000ull));
  const __m512i yb = _mm512_castpd_si512(y);
  __m512d a = _mm512_castsi512_pd(_mm512_andnot_si512(sign, yb));
  a = _mm512_min_pd(a, _mm512_set1_pd(kTanhMax));
  const __m512d one = _mm512_set1_pd(1.0);
  const __m512d big = _mm512_sub_pd(
      one, _mm512_div_pd(_mm512_set1_pd(2.0), _mm512_add_pd(exp_v(_mm512_add_pd(a, a)), one)));
  const __mmask8 tiny = _mm512_cmp_pd_mask(a, _mm512_set1_pd(kTanhTiny), _CMP_LT_OQ);
  const __m512d t = _mm512_mask_blend_pd(tiny, big, a);
  return _mm512_castsi512_pd(_mm512_or_si512(_mm512_castpd_si512(t), _mm512_and_si512(sign, yb)));
}

// Eight elements in double.
[[gnu::always_inline]] inline __m512d situ_v(__m512d g, __m512d u, __m512d B1, __m512d B2,
                                             __m512d i1, __m512d i2) {
  const __m512d one = _mm512_set1_pd(1.0);
  const __m512d neg_g = _mm512_castsi512_pd(_mm512_xor_si512(
      _mm512_castpd_si512(g), _mm512_set1_epi64(static_cast<int64_t>(0x8000000000000000ull))));
  const __m512d sig = _mm512_div_pd(one, _mm512_add_pd(one, exp_v(neg_g)));
  const __m512d tg = _mm512_mul_pd(B1, tanh_v(_mm512_mul_pd(g, i1)));
  const __m512d tu = _mm512_mul_pd(B2, tanh_v(_mm512_mul_pd(u, i2)));
  return _mm512_mul_pd(_mm512_mul_pd(tg, sig), tu);
}

}  // namespace

void situ_rows_avx512(const float* g, const float* u, int64_t n, float b1, float b2, float* out) {
  const double B1d = b1, B2d = b2;
  const __m512d B1 = _mm512_set1_pd(B1d), B2 = _mm512_set1_pd(B2d);
  const __m512d i1 = _mm512_set1_pd(1.0 / B1d), i2 = _mm512_set1_pd(1.0 / B2d);
  for (int64_t i = 0; i < n; i += 16) {
    const __mmask16 m =
        n - i >= 16 ? static_cast<__mmask16>(0xffff) : static_cast<__mmask16>((1u << (n - i)) - 1);
    const __m512 gf = _mm512_maskz_loadu_ps(m, g + i);
    const __m512 uf = _mm512_maskz_loadu_ps(m, u + i);
    const __m512d lo = situ_v(_mm512_cvtps_pd(_mm512_castps512_ps256(gf)),
                              _mm512_cvtps_pd(_mm512_castps512_ps256(uf)), B1, B2, i1, i2);
    const __m512d hi = situ_v(_mm512_cvtps_pd(_mm512_extractf32x8_ps(gf, 1)),
                              _mm512_cvtps_pd(_mm512_extractf32x8_ps(uf, 1)), B1, B2, i1, i2);
    __m512 v =
        _mm512_insertf32x8(_mm512_castps256_ps512(_mm512_cvtpd_ps(lo)), _mm512_cvtpd_ps(hi), 1);
    // A NaN g or u: g + u (a NaN).
    const __mmask16 nan = _mm512_cmp_ps_mask(gf, uf, _CMP_UNORD_Q);
    v = _mm512_mask_add_ps(v, nan, gf, uf);
    _mm512_mask_storeu_ps(out + i, m, v);
  }
}

}  // namespace k3::kernels
