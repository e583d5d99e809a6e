// AVX2 variants of shared/kernels/attention.h (same bits as the scalar
// reference: 16 partial sums in two registers, lanes 0-7 and 8-15; multiply
// then add, never fused: this file is built with -ffp-contract=off).
#include <immintrin.h>

#include "shared/kernels/attention.h"

namespace k3::kernels {
namespace {

// Lane k + lane k+8 (the two registers), then k+4, k+2, k+1.
float reduce16(__m256 lo, __m256 hi) {
  const __m256 a = _mm256_add_ps(lo, hi);
  const __m128 b = _mm_add_ps(_mm256_castps256_ps128(a), _mm256_extractf128_ps(a, 1));
  const __m128 c = _mm_add_ps(b, _mm_movehl_ps(b, b));
  return _mm_cvtss_f32(_mm_add_ss(c, _mm_shuffle_ps(c, c, 1)));
}

// Lanes j with j < count set (maskload/maskstore read the sign bit).
__m256i lanes_below(int64_t count) {
  const __m256i idx = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const int c = static_cast<int>(count < 0 ? 0 : (count > 8 ? 8 : count));
  return _mm256_cmpgt_epi32(_mm256_set1_epi32(c), idx);
}

template <int HB>
void scores_block(const float* q, int64_t q_stride, const float* rows, int64_t n, int64_t d,
                  float* scores, int64_t ld) {
  const int64_t full = d / 16 * 16;
  const __m256i t0 = lanes_below(d - full), t1 = lanes_below(d - full - 8);
  for (int64_t s = 0; s < n; ++s) {
    const float* r = rows + s * d;
    __m256 lo[HB], hi[HB];
    for (int b = 0; b < HB; ++b) lo[b] = hi[b] = _mm256_setzero_ps();
    for (int64_t i = 0; i < full; i += 16) {
      const __m256 x0 = _mm256_loadu_ps(r + i), x1 = _mm256_loadu_ps(r + i + 8);
      for (int b = 0; b < HB; ++b) {
        const float* qb = q + b * q_stride + i;
        lo[b] = _mm256_add_ps(lo[b], _mm256_mul_ps(_mm256_loadu_ps(qb), x0));
        hi[b] = _mm256_add_ps(hi[b], _mm256_mul_ps(_mm256_loadu_ps(qb + 8), x1));
      }
    }
    if (full < d) {
      const __m256 x0 = _mm256_maskload_ps(r + full, t0), x1 = _mm256_maskload_ps(r + full + 8, t1);
      for (int b = 0; b < HB; ++b) {
        const float* qb = q + b * q_stride + full;
        lo[b] = _mm256_add_ps(lo[b], _mm256_mul_ps(_mm256_maskload_ps(qb, t0), x0));
        hi[b] = _mm256_add_ps(hi[b], _mm256_mul_ps(_mm256_maskload_ps(qb + 8, t1), x1));
      }
    }
    for (int b = 0; b < HB; ++b) scores[b * ld + s] = reduce16(lo[b], hi[b]);
  }
}

template <int HB>
void weighted_block(const float* w, int64_t ld, const float* rows, int64_t n, int64_t d,
                    float* out) {
  for (int64_t i = 0; i < d; i += 16) {
    const __m256i m0 = lanes_below(d - i), m1 = lanes_below(d - i - 8);
    __m256 acc0[HB], acc1[HB];
    for (int b = 0; b < HB; ++b) {
      acc0[b] = _mm256_maskload_ps(out + b * d + i, m0);
      acc1[b] = _mm256_maskload_ps(out + b * d + i + 8, m1);
    }
    for (int64_t s = 0; s < n; ++s) {
      const float* r = rows + s * d + i;
      const __m256 x0 = _mm256_maskload_ps(r, m0), x1 = _mm256_maskload_ps(r + 8, m1);
      for (int b = 0; b < HB; ++b) {
        const __m256 ws = _mm256_set1_ps(w[b * ld + s]);
        acc0[b] = _mm256_add_ps(acc0[b], _mm256_mul_ps(ws, x0));
        acc1[b] = _mm256_add_ps(acc1[b], _mm256_mul_ps(ws, x1));
      }
    }
    for (int b = 0; b < HB; ++b) {
      _mm256_maskstore_ps(out + b * d + i, m0, acc0[b]);
      _mm256_maskstore_ps(out + b * d + i + 8, m1, acc1[b]);
    }
  }
}

}  // namespace

void attention_scores_avx2(const float* q, int64_t nq, int64_t q_stride, const float* rows,
                           int64_t n, int64_t d, float* scores, int64_t ld) {
  int64_t h = 0;
  for (; h + 4 <= nq; h += 4)
    scores_block<4>(q + h * q_stride, q_stride, rows, n, d, scores + h * ld, ld);
  for (; h < nq; ++h) scores_block<1>(q + h * q_stride, q_stride, rows, n, d, scores + h * ld, ld);
}

void attention_weighted_sum_avx2(const float* w, int64_t nq, int64_t ld, const float* rows,
                                 int64_t n, int64_t d, float* out) {
  int64_t h = 0;
  for (; h + 4 <= nq; h += 4) weighted_block<4>(w + h * ld, ld, rows, n, d, out + h * d);
  for (; h < nq; ++h) weighted_block<1>(w + h * ld, ld, rows, n, d, out + h * d);
}

}  // namespace k3::kernels
