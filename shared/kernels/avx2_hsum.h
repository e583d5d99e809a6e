// The horizontal float sum every AVX2 kernel file ends its dots with
// (dense_avx2.cpp and, through mxfp4_avx2_helpers.h, the two AVX2 MXFP4
// files), included by AVX2 translation units only. It is in an unnamed
// namespace: each of them gets its own copy, so the linker never merges one
// into code built without those flags.
#pragma once

#include <immintrin.h>

namespace k3::kernels {
namespace {

// ((v[0..3] + v[4..7]) folded twice): the same order in every caller.
[[gnu::always_inline]] inline float hsum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

}  // namespace
}  // namespace k3::kernels
