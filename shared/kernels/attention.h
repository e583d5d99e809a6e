// The two inner loops of causal attention over cached rows, for a block of
// query heads: the scores (dot products of each query with every row) and the
// weighted sum of the rows. Used by MLA (engined/model/mla.cpp) in prefill and
// decode alike.
//
// The arithmetic is defined so every variant gives the same bits, whatever its
// SIMD width:
// - a dot product keeps kDotLanes partial sums, element i going to sum
//   i mod kDotLanes (a row's last, partial block counts the missing elements as
//   0 * 0), each a running multiply-then-add in f32 (never a fused
//   multiply-add), and adds them pairwise at the end: sum k += sum k+8, then
//   k+4, k+2, k+1;
// - a weighted sum adds the rows' terms w_s * row_s[i] to out[i] one row after
//   another, s ascending, each a multiply then an add.
// Kernels: a scalar reference (always built), AVX2 and AVX-512 variants (files
// built with -ffp-contract=off so the compiler fuses nothing); the dispatching
// entry points pick the variant of base::kernel_isa().
#pragma once

#include <cstdint>

namespace k3::kernels {

constexpr int64_t kDotLanes = 16;

// scores[h * ld + s] = dot(q + h * q_stride, rows + s * d) over d elements,
// for h < nq and s < n.
void attention_scores(const float* q, int64_t nq, int64_t q_stride, const float* rows, int64_t n,
                      int64_t d, float* scores, int64_t ld);
// out[h * d + i] += sum over s < n, in order, of w[h * ld + s] * rows[s * d + i],
// for h < nq and i < d.
void attention_weighted_sum(const float* w, int64_t nq, int64_t ld, const float* rows, int64_t n,
                            int64_t d, float* out);

// The variants (tests call each one the machine can run).
void attention_scores_scalar(const float* q, int64_t nq, int64_t q_stride, const float* rows,
                             int64_t n, int64_t d, float* scores, int64_t ld);
void attention_weighted_sum_scalar(const float* w, int64_t nq, int64_t ld, const float* rows,
                                   int64_t n, int64_t d, float* out);
void attention_scores_avx2(const float* q, int64_t nq, int64_t q_stride, const float* rows,
                           int64_t n, int64_t d, float* scores, int64_t ld);
void attention_weighted_sum_avx2(const float* w, int64_t nq, int64_t ld, const float* rows,
                                 int64_t n, int64_t d, float* out);
void attention_scores_avx512(const float* q, int64_t nq, int64_t q_stride, const float* rows,
                             int64_t n, int64_t d, float* scores, int64_t ld);
void attention_weighted_sum_avx512(const float* w, int64_t nq, int64_t ld, const float* rows,
                                   int64_t n, int64_t d, float* out);

}  // namespace k3::kernels
