// AVX2/FMA variants of the row dot products of shared/kernels/dense.h. The
// only file of this pair compiled with -mavx2 -mfma -mf16c: it calls no inline
// or template code from shared headers (an AVX2 copy could be picked by the
// linker), only intrinsics, plain C++, its own file-local helpers and the
// AVX2-only avx2_hsum.h (unnamed namespace: a copy of its own).
//
// Every kernel is a template over R rows x T tokens processed together (R * T
// <= 3: 4 accumulators each in the 16 ymm registers): T tokens share the
// decoded weights (matmul), R = 2 rows share the loads of x (int8/f32 matvec,
// halving the x traffic from L2). The arithmetic applied to one (row, token)
// does not depend on R or T (same accumulators, same order), so the batched
// entry points (dots_*, gemv_*) give each result exactly the bits of the
// single dot (dot_*), and DenseMatrix::matvec and matmul agree bit for bit.
#include <immintrin.h>

#include "shared/kernels/avx2_hsum.h"
#include "shared/kernels/dense.h"

namespace k3::kernels {
namespace {

// Tokens per kernel call (with one row).
constexpr int kMaxTokens = 3;

// How far ahead of the loads the weight rows are prefetched.
constexpr int64_t kPrefetchBytes = 1024;

alignas(32) const int32_t kTailMask[16] = {-1, -1, -1, -1, -1, -1, -1, -1, 0, 0, 0, 0, 0, 0, 0, 0};

// Lanes [0, len) set, len in [0, 8].
[[gnu::always_inline]] inline __m256i tail_mask(int64_t len) {
  return _mm256_loadu_si256(reinterpret_cast<const __m256i*>(kTailMask + 8 - len));
}

// ---------------------------------------------------------------------------
// f32 and int8-per-row: four accumulators over 32-column blocks, then 8-column
// blocks into acc[0], then a masked tail into acc[1]; (a0 + a1) + (a2 + a3).

[[gnu::always_inline]] inline __m256 load_w(const float* w) {
  return _mm256_loadu_ps(w);
}
[[gnu::always_inline]] inline __m256 load_w(const int8_t* w) {
  return _mm256_cvtepi32_ps(
      _mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(w))));
}
[[gnu::always_inline]] inline __m256 load_w_tail(const float* w, int64_t len) {
  return _mm256_maskload_ps(w, tail_mask(len));
}
[[gnu::always_inline]] inline __m256 load_w_tail(const int8_t* w, int64_t len) {
  int8_t buf[8] = {0, 0, 0, 0, 0, 0, 0, 0};  // the row may end here: never read past it
  for (int64_t i = 0; i < len; ++i) buf[i] = w[i];
  return load_w(buf);
}

// R rows w[r] times T tokens x[t] -> out[r * T + t]. The arithmetic of one
// (row, token) does not depend on R or T.
template <int R, int T, typename W>
void dot_rows(const W* const* w, const float* const* x, int64_t n, float* out) {
  __m256 acc[R][T][4];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < 4; ++j) acc[r][t][j] = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 32 <= n; i += 32) {
    // The weights stream from RAM: fetch ahead (one 64-byte line per call for
    // int8, two for f32: 32 columns).
    for (int r = 0; r < R; ++r)
      for (int64_t l = 0; l < static_cast<int64_t>(32 * sizeof(W)); l += 64)
        _mm_prefetch(reinterpret_cast<const char*>(w[r] + i) + kPrefetchBytes + l, _MM_HINT_T0);
    for (int j = 0; j < 4; ++j) {
      __m256 wv[R];
      for (int r = 0; r < R; ++r) wv[r] = load_w(w[r] + i + 8 * j);
      for (int t = 0; t < T; ++t) {
        const __m256 xv = _mm256_loadu_ps(x[t] + i + 8 * j);
        for (int r = 0; r < R; ++r) acc[r][t][j] = _mm256_fmadd_ps(wv[r], xv, acc[r][t][j]);
      }
    }
  }
  for (; i + 8 <= n; i += 8) {
    __m256 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = load_w(w[r] + i);
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_loadu_ps(x[t] + i);
      for (int r = 0; r < R; ++r) acc[r][t][0] = _mm256_fmadd_ps(wv[r], xv, acc[r][t][0]);
    }
  }
  if (i < n) {
    const __m256i m = tail_mask(n - i);
    __m256 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = load_w_tail(w[r] + i, n - i);
    for (int t = 0; t < T; ++t) {
      const __m256 xv = _mm256_maskload_ps(x[t] + i, m);
      for (int r = 0; r < R; ++r) acc[r][t][1] = _mm256_fmadd_ps(wv[r], xv, acc[r][t][1]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t)
      out[r * T + t] = hsum(_mm256_add_ps(_mm256_add_ps(acc[r][t][0], acc[r][t][1]),
                                          _mm256_add_ps(acc[r][t][2], acc[r][t][3])));
}

// ---------------------------------------------------------------------------
// int4 per 64-column group. The 32 bytes of a group are split into nibbles
// (lo: even columns, hi: odd; lane 0: columns 0-31, lane 1: 32-63), mapped to
// q - 8 by a shuffle LUT and spread to the top byte of int32 lanes (q << 24,
// exact in f32). x is prepared once per token in that order, times 2^-24
// (exact unless |x| < 2^-102), so each product is exactly q * x.

[[gnu::always_inline]] inline __m256i spread_index(int k) {
  // Bytes 4k .. 4k+3 of each lane to the top byte of dwords 0..3.
  return _mm256_or_si256(_mm256_setr_epi8(-128, -128, -128, 0, -128, -128, -128, 1, -128, -128,
                                          -128, 2, -128, -128, -128, 3, -128, -128, -128, 0, -128,
                                          -128, -128, 1, -128, -128, -128, 2, -128, -128, -128, 3),
                         _mm256_set1_epi32(static_cast<int32_t>((4u * k) << 24)));
}

// Groups [g0, g1) of R rows w[r] (scales s[r]) into acc[r * T + t] for T
// prepared tokens xp[t]. The arithmetic of one (row, token) does not depend on
// R or T.
template <int R, int T>
[[gnu::always_inline]] inline void q4_groups(const uint8_t* const* w, const float* const* scales,
                                             const float* const* xp, int64_t g0, int64_t g1,
                                             __m256* acc) {
  const __m256i lut = _mm256_setr_epi8(-8, -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7, -8,
                                       -7, -6, -5, -4, -3, -2, -1, 0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  for (int64_t g = g0; g < g1; ++g) {
    __m256i lo[R], hi[R];
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(w[r] + 32 * g + kPrefetchBytes), _MM_HINT_T0);
      const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(w[r] + 32 * g));
      lo[r] = _mm256_shuffle_epi8(lut, _mm256_and_si256(packed, nibble));
      hi[r] = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble));
    }
    __m256 se[R][T], so[R][T];
    for (int k = 0; k < 4; ++k) {
      __m256 fe[R], fo[R];
      for (int r = 0; r < R; ++r) {
        fe[r] = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(lo[r], spread_index(k)));
        fo[r] = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(hi[r], spread_index(k)));
      }
      for (int t = 0; t < T; ++t) {
        const float* x = xp[t] + 64 * g;
        const __m256 xe = _mm256_loadu_ps(x + 8 * k), xo = _mm256_loadu_ps(x + 32 + 8 * k);
        for (int r = 0; r < R; ++r) {
          if (k == 0) {
            se[r][t] = _mm256_mul_ps(fe[r], xe);
            so[r][t] = _mm256_mul_ps(fo[r], xo);
          } else {
            se[r][t] = _mm256_fmadd_ps(fe[r], xe, se[r][t]);
            so[r][t] = _mm256_fmadd_ps(fo[r], xo, so[r][t]);
          }
        }
      }
    }
    for (int r = 0; r < R; ++r) {
      const __m256 scale = _mm256_broadcast_ss(scales[r] + g);
      for (int t = 0; t < T; ++t)
        acc[r * T + t] = _mm256_fmadd_ps(_mm256_add_ps(se[r][t], so[r][t]), scale, acc[r * T + t]);
    }
  }
}

// Prepares columns [64 g0, min(n, 64 g1)) of x into xp[64 (g - g0) ..]: for each
// group, [even | odd] halves of 32 floats, each [cols 8k, 8k+2, 8k+4, 8k+6 of
// lane 0 | the same + 32] for k = 0..3; zero past n.
void prepare_q4(const float* x, int64_t n, int64_t g0, int64_t g1, float* xp) {
  const __m256 k2m24 = _mm256_set1_ps(1.0f / 16777216.0f);
  const __m256i even_odd = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  for (int64_t g = g0; g < g1; ++g) {
    float* o = xp + 64 * (g - g0);
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k) {
        const int64_t c = 64 * g + 32 * h + 8 * k;
        const int64_t len = n - c < 8 ? n - c : 8;
        const __m256 xv = len >= 8  ? _mm256_loadu_ps(x + c)
                          : len > 0 ? _mm256_maskload_ps(x + c, tail_mask(len))
                                    : _mm256_setzero_ps();
        const __m256 v = _mm256_mul_ps(_mm256_permutevar8x32_ps(xv, even_odd), k2m24);
        _mm_storeu_ps(o + 8 * k + 4 * h, _mm256_castps256_ps128(v));
        _mm_storeu_ps(o + 32 + 8 * k + 4 * h, _mm256_extractf128_ps(v, 1));
      }
  }
}

template <int R, int T>
void dot_q4_rows(const uint8_t* const* w, const float* const* scales, const float* const* xp,
                 int64_t n, float* out) {
  __m256 acc[R * T];
  for (int i = 0; i < R * T; ++i) acc[i] = _mm256_setzero_ps();
  q4_groups<R, T>(w, scales, xp, 0, (n + 63) / 64, acc);
  for (int i = 0; i < R * T; ++i) out[i] = hsum(acc[i]);
}

// Runs kernel K<T> over tokens in batches of kMaxTokens.
template <typename F1, typename F2, typename F3>
void for_token_batches(const float* X, int64_t ldx, int64_t T, float* out, int64_t out_stride,
                       F1 k1, F2 k2, F3 k3) {
  float r[kMaxTokens];
  int64_t t = 0;
  for (; t < T; t += kMaxTokens) {
    const int64_t left = T - t;
    const int64_t m = left < kMaxTokens ? left : kMaxTokens;
    const float* x[kMaxTokens];
    for (int64_t i = 0; i < kMaxTokens; ++i) x[i] = X + (t + (i < m ? i : 0)) * ldx;
    if (m == 3)
      k3(x, r);
    else if (m == 2)
      k2(x, r);
    else
      k1(x, r);
    for (int64_t i = 0; i < m; ++i) out[(t + i) * out_stride] = r[i];
  }
}

}  // namespace

float dot_f32_avx2(const float* w, const float* x, int64_t n) {
  float r;
  dot_rows<1, 1>(&w, &x, n, &r);
  return r;
}

float dot_q8_avx2(const int8_t* w, float scale, const float* x, int64_t n) {
  float r;
  dot_rows<1, 1>(&w, &x, n, &r);
  return r * scale;
}

float dot_q4g64_avx2(const uint8_t* w, const float* scales, const float* x, int64_t n) {
  // x prepared in chunks on the stack; the accumulator carries over, so the
  // bits are those of dot_q4g64_prepared_avx2.
  constexpr int64_t kChunkGroups = 64;
  alignas(32) float xp[64 * kChunkGroups];
  __m256 acc = _mm256_setzero_ps();
  const int64_t groups = (n + 63) / 64;
  for (int64_t g0 = 0; g0 < groups; g0 += kChunkGroups) {
    const int64_t g1 = groups - g0 < kChunkGroups ? groups : g0 + kChunkGroups;
    prepare_q4(x, n, g0, g1, xp);
    const float* base = xp - 64 * g0;  // q4_groups indexes by absolute group
    q4_groups<1, 1>(&w, &scales, &base, g0, g1, &acc);
  }
  return hsum(acc);
}

void prepare_x_q4g64_avx2(const float* x, int64_t n, float* xp) {
  prepare_q4(x, n, 0, (n + 63) / 64, xp);
}

float dot_q4g64_prepared_avx2(const uint8_t* w, const float* scales, const float* xp, int64_t n) {
  float r;
  dot_q4_rows<1, 1>(&w, &scales, &xp, n, &r);
  return r;
}

void gemv_f32_avx2(const float* w, int64_t ldw, const float* x, int64_t n, float* y, int64_t r0,
                   int64_t r1) {
  int64_t r = r0;
  for (; r + 2 <= r1; r += 2) {
    const float* rows[2] = {w + r * ldw, w + (r + 1) * ldw};
    dot_rows<2, 1>(rows, &x, n, y + r);
  }
  if (r < r1) y[r] = dot_f32_avx2(w + r * ldw, x, n);
}

void gemv_q8_avx2(const int8_t* w, int64_t ldw, const float* scales, const float* x, int64_t n,
                  float* y, int64_t r0, int64_t r1) {
  int64_t r = r0;
  for (; r + 2 <= r1; r += 2) {
    const int8_t* rows[2] = {w + r * ldw, w + (r + 1) * ldw};
    float out[2];
    dot_rows<2, 1>(rows, &x, n, out);
    y[r] = out[0] * scales[r];
    y[r + 1] = out[1] * scales[r + 1];
  }
  if (r < r1) y[r] = dot_q8_avx2(w + r * ldw, scales[r], x, n);
}

void gemv_q4g64_prepared_avx2(const uint8_t* w, const float* scales, const float* xp, int64_t n,
                              float* y, int64_t r0, int64_t r1) {
  // One row at a time: int4 decoding is compute-bound, and a single
  // sequential weight stream prefetches best (measured: two rows sharing the
  // x loads are no faster here, unlike int8).
  const int64_t groups = (n + 63) / 64;
  for (int64_t r = r0; r < r1; ++r)
    y[r] = dot_q4g64_prepared_avx2(w + r * groups * 32, scales + r * groups, xp, n);
}

void dots_f32_avx2(const float* w, const float* X, int64_t ldx, int64_t T, int64_t n, float* out,
                   int64_t out_stride) {
  for_token_batches(
      X, ldx, T, out, out_stride,
      [&](const float* const* x, float* r) { dot_rows<1, 1>(&w, x, n, r); },
      [&](const float* const* x, float* r) { dot_rows<1, 2>(&w, x, n, r); },
      [&](const float* const* x, float* r) { dot_rows<1, 3>(&w, x, n, r); });
}

void dots_q8_avx2(const int8_t* w, float scale, const float* X, int64_t ldx, int64_t T, int64_t n,
                  float* out, int64_t out_stride) {
  for_token_batches(
      X, ldx, T, out, out_stride,
      [&](const float* const* x, float* r) {
        dot_rows<1, 1>(&w, x, n, r);
        r[0] *= scale;
      },
      [&](const float* const* x, float* r) {
        dot_rows<1, 2>(&w, x, n, r);
        for (int i = 0; i < 2; ++i) r[i] *= scale;
      },
      [&](const float* const* x, float* r) {
        dot_rows<1, 3>(&w, x, n, r);
        for (int i = 0; i < 3; ++i) r[i] *= scale;
      });
}

void dots_q4g64_prepared_avx2(const uint8_t* w, const float* scales, const float* XP, int64_t ldxp,
                              int64_t T, int64_t n, float* out, int64_t out_stride) {
  for_token_batches(
      XP, ldxp, T, out, out_stride,
      [&](const float* const* x, float* r) { dot_q4_rows<1, 1>(&w, &scales, x, n, r); },
      [&](const float* const* x, float* r) { dot_q4_rows<1, 2>(&w, &scales, x, n, r); },
      [&](const float* const* x, float* r) { dot_q4_rows<1, 3>(&w, &scales, x, n, r); });
}

}  // namespace k3::kernels
