#include "shared/kernels/attention.h"

#include "shared/base/cpu_features.h"

namespace k3::kernels {

void attention_scores_scalar(const float* q, int64_t nq, int64_t q_stride, const float* rows,
                             int64_t n, int64_t d, float* scores, int64_t ld) {
  for (int64_t h = 0; h < nq; ++h) {
    const float* qh = q + h * q_stride;
    for (int64_t s = 0; s < n; ++s) {
      const float* r = rows + s * d;
      float acc[kDotLanes] = {};
      for (int64_t i0 = 0; i0 < d; i0 += kDotLanes)
        for (int64_t k = 0; k < kDotLanes; ++k) {
          const int64_t i = i0 + k;
          const float prod = i < d ? qh[i] * r[i] : 0.0f * 0.0f;
          acc[k] = acc[k] + prod;
        }
      for (int64_t w = kDotLanes / 2; w >= 1; w /= 2)
        for (int64_t k = 0; k < w; ++k) acc[k] = acc[k] + acc[k + w];
      scores[h * ld + s] = acc[0];
    }
  }
}

void attention_weighted_sum_scalar(const float* w, int64_t nq, int64_t ld, const float* rows,
                                   int64_t n, int64_t d, float* out) {
  for (int64_t h = 0; h < nq; ++h) {
    float* oh = out + h * d;
    for (int64_t s = 0; s < n; ++s) {
      const float ws = w[h * ld + s];
      const float* r = rows + s * d;
      for (int64_t i = 0; i < d; ++i) oh[i] = oh[i] + ws * r[i];
    }
  }
}

void attention_scores(const float* q, int64_t nq, int64_t q_stride, const float* rows, int64_t n,
                      int64_t d, float* scores, int64_t ld) {
  switch (base::kernel_isa()) {
#ifdef K3_HAVE_AVX512_KERNELS
    case base::KernelIsa::kAvx512:
      return attention_scores_avx512(q, nq, q_stride, rows, n, d, scores, ld);
#endif
#ifdef K3_HAVE_AVX2_KERNELS
    case base::KernelIsa::kAvx2:
      return attention_scores_avx2(q, nq, q_stride, rows, n, d, scores, ld);
#endif
    default:
      return attention_scores_scalar(q, nq, q_stride, rows, n, d, scores, ld);
  }
}

void attention_weighted_sum(const float* w, int64_t nq, int64_t ld, const float* rows, int64_t n,
                            int64_t d, float* out) {
  switch (base::kernel_isa()) {
#ifdef K3_HAVE_AVX512_KERNELS
    case base::KernelIsa::kAvx512:
      return attention_weighted_sum_avx512(w, nq, ld, rows, n, d, out);
#endif
#ifdef K3_HAVE_AVX2_KERNELS
    case base::KernelIsa::kAvx2:
      return attention_weighted_sum_avx2(w, nq, ld, rows, n, d, out);
#endif
    default:
      return attention_weighted_sum_scalar(w, nq, ld, rows, n, d, out);
  }
}

}  // namespace k3::kernels
