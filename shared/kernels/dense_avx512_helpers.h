// File-local helpers of the two AVX-512 dense kernel files (dense_avx512.cpp
// and dense_gemm_avx512.cpp), included by those two only: the int4 pair
// decode and the per-pair arithmetic they share, so the tiled GEMM gives each
// result the single dot's bits by running the very same operations. In an
// unnamed namespace: each AVX-512 translation unit gets its own copy, so the
// linker never merges one into code built without those flags.
//
// int4 per 64-column group, two groups per 512-bit load (a "pair": 64 packed
// bytes; 128-bit lane L holds group 2p + L / 2, columns 32 (L % 2) .. +31).
// The bytes are split into nibbles (lo: even columns, hi: odd), mapped to
// q - 8 by a shuffle LUT and spread to the top byte of int32 lanes (q << 24,
// exact in f32): spread k takes bytes 4k .. 4k+3 of each lane, i.e. lane L,
// element d is column 32 (L % 2) + 8k + 2d (+1 for hi) of its group. x is
// prepared once per token in that order, times 2^-24 (exact unless |x| <
// 2^-102), so each product is exactly q * x. A last odd group is loaded
// masked (lanes 2-3 zero, scale 0, x 0).
#pragma once

#include <immintrin.h>

#include <cstdint>

namespace k3::kernels {
namespace {

[[gnu::always_inline]] inline __m512i spread_index(int k) {
  return _mm512_or_si512(
      _mm512_broadcast_i32x4(_mm_setr_epi8(-128, -128, -128, 0, -128, -128, -128, 1, -128, -128,
                                           -128, 2, -128, -128, -128, 3)),
      _mm512_set1_epi32(static_cast<int32_t>((4u * k) << 24)));
}

// Pair p of one row (packed bytes w, its `groups` scales): the nibbles as
// q - 8 (lo: even columns, hi: odd) and the scale vector (lanes 0-1: group
// 2p's, lanes 2-3: group 2p + 1's, 0 if absent).
struct Q4Pair {
  __m512i lo, hi;
  __m512 scale;
};
[[gnu::always_inline]] inline Q4Pair load_q4_pair(const uint8_t* w, const float* scales,
                                                  int64_t groups, int64_t p) {
  const __m512i lut =
      _mm512_broadcast_i32x4(_mm_setr_epi8(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7));
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  const bool whole = 2 * p + 2 <= groups;
  const uint8_t* q = w + 64 * p;
  const __m512i packed = whole ? _mm512_loadu_si512(q) : _mm512_maskz_loadu_epi8(0xffffffffull, q);
  const __m512 s0 = _mm512_set1_ps(scales[2 * p]);
  const __m512 s1 = whole ? _mm512_set1_ps(scales[2 * p + 1]) : _mm512_setzero_ps();
  return {_mm512_shuffle_epi8(lut, _mm512_and_si512(packed, nibble)),
          _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(packed, 4), nibble)),
          _mm512_mask_blend_ps(0xff00, s0, s1)};
}

// Spread k of a pair's nibbles (lo or hi) as floats.
[[gnu::always_inline]] inline __m512 q4_spread(__m512i nibbles, int k) {
  return _mm512_cvtepi32_ps(_mm512_shuffle_epi8(nibbles, spread_index(k)));
}

// One pair of R rows times T prepared tokens xp[t] (128 floats per pair,
// indexed by absolute pair p) into acc[r * T + t]: se = sum_k fe_k xe_k and
// so = sum_k fo_k xo_k (a product, then FMAs, k = 0..3), acc = fma(se + so,
// scale, acc). fe(r, k) and fo(r, k) give the decoded spreads, scale[r] the
// scale vector. The arithmetic of one (row, token) does not depend on R or T.
template <int R, int T, typename Fe, typename Fo>
[[gnu::always_inline]] inline void q4_pair_fma(Fe fe_of, Fo fo_of, const __m512* scale,
                                               const float* const* xp, int64_t p, __m512* acc) {
  __m512 se[R][T], so[R][T];
  for (int k = 0; k < 4; ++k) {
    __m512 fe[R], fo[R];
    for (int r = 0; r < R; ++r) {
      fe[r] = fe_of(r, k);
      fo[r] = fo_of(r, k);
    }
    for (int t = 0; t < T; ++t) {
      const float* x = xp[t] + 128 * p;
      const __m512 xe = _mm512_loadu_ps(x + 16 * k), xo = _mm512_loadu_ps(x + 64 + 16 * k);
      for (int r = 0; r < R; ++r) {
        if (k == 0) {
          se[r][t] = _mm512_mul_ps(fe[r], xe);
          so[r][t] = _mm512_mul_ps(fo[r], xo);
        } else {
          se[r][t] = _mm512_fmadd_ps(fe[r], xe, se[r][t]);
          so[r][t] = _mm512_fmadd_ps(fo[r], xo, so[r][t]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t)
      acc[r * T + t] = _mm512_fmadd_ps(_mm512_add_ps(se[r][t], so[r][t]), scale[r], acc[r * T + t]);
}

}  // namespace
}  // namespace k3::kernels
