// AVX-512 variants of shared/kernels/attention.h (same bits as the scalar
// reference: 16 partial sums, one per lane of a register; multiply then add,
// never fused: this file is built with -ffp-contract=off).
#include <immintrin.h>

#include "shared/kernels/attention.h"

namespace k3::kernels {
namespace {

// Lane k + lane k+8, then k+4, k+2, k+1 (the reference's order).
float reduce16(__m512 v) {
  const __m256 a = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}

__mmask16 lanes_below(int64_t count) {
  return count >= 16  ? static_cast<__mmask16>(0xffff)
         : count <= 0 ? static_cast<__mmask16>(0)
                      : static_cast<__mmask16>((1u << count) - 1);
}

// HB heads against every row: each row is loaded once per block of heads.
template <int HB>
void scores_block(const float* q, int64_t q_stride, const float* rows, int64_t n, int64_t d,
                  float* scores, int64_t ld) {
  const int64_t full = d / 16 * 16;
  const __mmask16 tail = lanes_below(d - full);
  for (int64_t s = 0; s < n; ++s) {
    const float* r = rows + s * d;
    __m512 acc[HB];
    for (int b = 0; b < HB; ++b) acc[b] = _mm512_setzero_ps();
    for (int64_t i = 0; i < full; i += 16) {
      const __m512 x = _mm512_loadu_ps(r + i);
      for (int b = 0; b < HB; ++b)
        acc[b] = _mm512_add_ps(acc[b], _mm512_mul_ps(_mm512_loadu_ps(q + b * q_stride + i), x));
    }
    if (full < d) {
      const __m512 x = _mm512_maskz_loadu_ps(tail, r + full);
      for (int b = 0; b < HB; ++b)
        acc[b] = _mm512_add_ps(
            acc[b], _mm512_mul_ps(_mm512_maskz_loadu_ps(tail, q + b * q_stride + full), x));
    }
    for (int b = 0; b < HB; ++b) scores[b * ld + s] = reduce16(acc[b]);
  }
}

// HB heads' outputs, 32 columns at a time, kept in registers over all rows.
template <int HB>
void weighted_block(const float* w, int64_t ld, const float* rows, int64_t n, int64_t d,
                    float* out) {
  for (int64_t i = 0; i < d; i += 32) {
    const __mmask16 m0 = lanes_below(d - i), m1 = lanes_below(d - i - 16);
    __m512 acc0[HB], acc1[HB];
    for (int b = 0; b < HB; ++b) {
      acc0[b] = _mm512_maskz_loadu_ps(m0, out + b * d + i);
      acc1[b] = _mm512_maskz_loadu_ps(m1, out + b * d + i + 16);
    }
    for (int64_t s = 0; s < n; ++s) {
      const float* r = rows + s * d + i;
      const __m512 x0 = _mm512_maskz_loadu_ps(m0, r), x1 = _mm512_maskz_loadu_ps(m1, r + 16);
      for (int b = 0; b < HB; ++b) {
        const __m512 ws = _mm512_set1_ps(w[b * ld + s]);
        acc0[b] = _mm512_add_ps(acc0[b], _mm512_mul_ps(ws, x0));
        acc1[b] = _mm512_add_ps(acc1[b], _mm512_mul_ps(ws, x1));
      }
    }
    for (int b = 0; b < HB; ++b) {
      _mm512_mask_storeu_ps(out + b * d + i, m0, acc0[b]);
      _mm512_mask_storeu_ps(out + b * d + i + 16, m1, acc1[b]);
    }
  }
}

}  // namespace

void attention_scores_avx512(const float* q, int64_t nq, int64_t q_stride, const float* rows,
                             int64_t n, int64_t d, float* scores, int64_t ld) {
  int64_t h = 0;
  for (; h + 4 <= nq; h += 4)
    scores_block<4>(q + h * q_stride, q_stride, rows, n, d, scores + h * ld, ld);
  for (; h < nq; ++h) scores_block<1>(q + h * q_stride, q_stride, rows, n, d, scores + h * ld, ld);
}

void attention_weighted_sum_avx512(const float* w, int64_t nq, int64_t ld, const float* rows,
                                   int64_t n, int64_t d, float* out) {
  int64_t h = 0;
  for (; h + 4 <= nq; h += 4) weighted_block<4>(w + h * ld, ld, rows, n, d, out + h * d);
  for (; h < nq; ++h) weighted_block<1>(w + h * ld, ld, rows, n, d, out + h * d);
}

}  // namespace k3::kernels
