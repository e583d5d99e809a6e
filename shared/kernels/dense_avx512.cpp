// AVX-512 variants of the row dot products of shared/kernels/dense.h. The only
// file of this pair compiled with the AVX-512 flags: it calls no inline or
// template code from shared headers (an AVX-512 copy could be picked by the
// linker), only intrinsics, plain C++ and its own file-local helpers.
//
// As in dense_avx2.cpp, every kernel is a template over R rows x T tokens
// processed together (R * T <= 4: 4 accumulators each in the 32 zmm
// registers); the arithmetic applied to one (row, token) does not depend on R
// or T (same accumulators, same order), so the batched entry points (dots_*,
// gemv_*) give each result exactly the bits of the single dot (dot_*), and
// DenseMatrix::matvec and matmul agree bit for bit. The activations stay f32
// (no VNNI here: int8 activations would change the numerics).
#include <immintrin.h>

#include "shared/kernels/dense.h"
#include "shared/kernels/dense_avx512_helpers.h"

namespace k3::kernels {
namespace {

// Tokens per kernel call (with one row).
constexpr int kMaxTokens = 4;

// How far ahead of the loads the weight rows are prefetched.
constexpr int64_t kPrefetchBytes = 1024;

// Lanes [0, len) set, len in [0, 16].
[[gnu::always_inline]] inline __mmask16 tail_mask(int64_t len) {
  return static_cast<__mmask16>((1u << len) - 1);
}

// ---------------------------------------------------------------------------
// f32 and int8-per-row: four accumulators over 64-column blocks, then
// 16-column blocks into acc[0], then a masked tail into acc[1];
// (a0 + a1) + (a2 + a3), reduced.

[[gnu::always_inline]] inline __m512 load_w(const float* w) {
  return _mm512_loadu_ps(w);
}
[[gnu::always_inline]] inline __m512 load_w(const int8_t* w) {
  return _mm512_cvtepi32_ps(
      _mm512_cvtepi8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(w))));
}
// Masked loads read nothing past the row (and do not fault there).
[[gnu::always_inline]] inline __m512 load_w_tail(const float* w, int64_t len) {
  return _mm512_maskz_loadu_ps(tail_mask(len), w);
}
[[gnu::always_inline]] inline __m512 load_w_tail(const int8_t* w, int64_t len) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(tail_mask(len), w)));
}

// R rows w[r] times T tokens x[t] -> out[r * T + t]. The arithmetic of one
// (row, token) does not depend on R or T.
template <int R, int T, typename W>
void dot_rows(const W* const* w, const float* const* x, int64_t n, float* out) {
  __m512 acc[R][T][4];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t)
      for (int j = 0; j < 4; ++j) acc[r][t][j] = _mm512_setzero_ps();
  int64_t i = 0;
  for (; i + 64 <= n; i += 64) {
    for (int r = 0; r < R; ++r)
      for (int64_t l = 0; l < static_cast<int64_t>(64 * sizeof(W)); l += 64)
        _mm_prefetch(reinterpret_cast<const char*>(w[r] + i) + kPrefetchBytes + l, _MM_HINT_T0);
    for (int j = 0; j < 4; ++j) {
      __m512 wv[R];
      for (int r = 0; r < R; ++r) wv[r] = load_w(w[r] + i + 16 * j);
      for (int t = 0; t < T; ++t) {
        const __m512 xv = _mm512_loadu_ps(x[t] + i + 16 * j);
        for (int r = 0; r < R; ++r) acc[r][t][j] = _mm512_fmadd_ps(wv[r], xv, acc[r][t][j]);
      }
    }
  }
  for (; i + 16 <= n; i += 16) {
    __m512 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = load_w(w[r] + i);
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_loadu_ps(x[t] + i);
      for (int r = 0; r < R; ++r) acc[r][t][0] = _mm512_fmadd_ps(wv[r], xv, acc[r][t][0]);
    }
  }
  if (i < n) {
    const __mmask16 m = tail_mask(n - i);
    __m512 wv[R];
    for (int r = 0; r < R; ++r) wv[r] = load_w_tail(w[r] + i, n - i);
    for (int t = 0; t < T; ++t) {
      const __m512 xv = _mm512_maskz_loadu_ps(m, x[t] + i);
      for (int r = 0; r < R; ++r) acc[r][t][1] = _mm512_fmadd_ps(wv[r], xv, acc[r][t][1]);
    }
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t)
      out[r * T + t] = _mm512_reduce_add_ps(_mm512_add_ps(
          _mm512_add_ps(acc[r][t][0], acc[r][t][1]), _mm512_add_ps(acc[r][t][2], acc[r][t][3])));
}

// ---------------------------------------------------------------------------
// int4 (the layout and the per-pair arithmetic: dense_avx512_helpers.h).

// Pairs [p0, p1) of R rows w[r] (scales s[r], `groups` of them per row) into
// acc[r * T + t] for T prepared tokens xp[t] (128 floats per pair). The
// arithmetic of one (row, token) does not depend on R or T.
template <int R, int T>
[[gnu::always_inline]] inline void q4_pairs(const uint8_t* const* w, const float* const* scales,
                                            const float* const* xp, int64_t groups, int64_t p0,
                                            int64_t p1, __m512* acc) {
  for (int64_t p = p0; p < p1; ++p) {
    Q4Pair pair[R];
    __m512 scale[R];
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(w[r] + 64 * p + kPrefetchBytes), _MM_HINT_T0);
      pair[r] = load_q4_pair(w[r], scales[r], groups, p);
      scale[r] = pair[r].scale;
    }
    q4_pair_fma<R, T>([&](int r, int k) { return q4_spread(pair[r].lo, k); },
                      [&](int r, int k) { return q4_spread(pair[r].hi, k); }, scale, xp, p, acc);
  }
}

// Prepares the columns of pairs [p0, p1) of x into xp[128 (p - p0) ..]: per
// pair, [even | odd] halves of 64 floats, each 4 spreads k of 16 floats
// (lane L element d: column 64 (2p + L / 2) + 32 (L % 2) + 8k + 2d, +1 for
// odd), times 2^-24; zero past n.
void prepare_q4(const float* x, int64_t n, int64_t p0, int64_t p1, float* xp) {
  for (int64_t p = p0; p < p1; ++p) {
    float* o = xp + 128 * (p - p0);
    for (int k = 0; k < 4; ++k)
      for (int lane = 0; lane < 4; ++lane)
        for (int d = 0; d < 4; ++d) {
          const int64_t c = 64 * (2 * p + lane / 2) + 32 * (lane % 2) + 8 * k + 2 * d;
          o[16 * k + 4 * lane + d] = c < n ? x[c] * (1.0f / 16777216.0f) : 0.0f;
          o[64 + 16 * k + 4 * lane + d] = c + 1 < n ? x[c + 1] * (1.0f / 16777216.0f) : 0.0f;
        }
  }
}

template <int R, int T>
void dot_q4_rows(const uint8_t* const* w, const float* const* scales, const float* const* xp,
                 int64_t n, float* out) {
  __m512 acc[R * T];
  for (int i = 0; i < R * T; ++i) acc[i] = _mm512_setzero_ps();
  const int64_t groups = (n + 63) / 64;
  q4_pairs<R, T>(w, scales, xp, groups, 0, (groups + 1) / 2, acc);
  for (int i = 0; i < R * T; ++i) out[i] = _mm512_reduce_add_ps(acc[i]);
}

// Runs kernel K<T> over tokens in batches of kMaxTokens.
template <typename F1, typename F2, typename F3, typename F4>
void for_token_batches(const float* X, int64_t ldx, int64_t T, float* out, int64_t out_stride,
                       F1 k1, F2 k2, F3 k3, F4 k4) {
  float r[kMaxTokens];
  for (int64_t t = 0; t < T; t += kMaxTokens) {
    const int64_t left = T - t;
    const int64_t m = left < kMaxTokens ? left : kMaxTokens;
    const float* x[kMaxTokens];
    for (int64_t i = 0; i < kMaxTokens; ++i) x[i] = X + (t + (i < m ? i : 0)) * ldx;
    if (m == 4)
      k4(x, r);
    else if (m == 3)
      k3(x, r);
    else if (m == 2)
      k2(x, r);
    else
      k1(x, r);
    for (int64_t i = 0; i < m; ++i) out[(t + i) * out_stride] = r[i];
  }
}

}  // namespace

float dot_f32_avx512(const float* w, const float* x, int64_t n) {
  float r;
  dot_rows<1, 1>(&w, &x, n, &r);
  return r;
}

float dot_q8_avx512(const int8_t* w, float scale, const float* x, int64_t n) {
  float r;
  dot_rows<1, 1>(&w, &x, n, &r);
  return r * scale;
}

float dot_q4g64_avx512(const uint8_t* w, const float* scales, const float* x, int64_t n) {
  // x prepared in chunks on the stack; the accumulator carries over, so the
  // bits are those of dot_q4g64_prepared_avx512.
  constexpr int64_t kChunkPairs = 32;
  alignas(64) float xp[128 * kChunkPairs];
  __m512 acc = _mm512_setzero_ps();
  const int64_t groups = (n + 63) / 64, pairs = (groups + 1) / 2;
  for (int64_t p0 = 0; p0 < pairs; p0 += kChunkPairs) {
    const int64_t p1 = pairs - p0 < kChunkPairs ? pairs : p0 + kChunkPairs;
    prepare_q4(x, n, p0, p1, xp);
    const float* base = xp - 128 * p0;  // q4_pairs indexes by absolute pair
    q4_pairs<1, 1>(&w, &scales, &base, groups, p0, p1, &acc);
  }
  return _mm512_reduce_add_ps(acc);
}

void prepare_x_q4g64_avx512(const float* x, int64_t n, float* xp) {
  prepare_q4(x, n, 0, ((n + 63) / 64 + 1) / 2, xp);
}

float dot_q4g64_prepared_avx512(const uint8_t* w, const float* scales, const float* xp, int64_t n) {
  float r;
  dot_q4_rows<1, 1>(&w, &scales, &xp, n, &r);
  return r;
}

void gemv_f32_avx512(const float* w, int64_t ldw, const float* x, int64_t n, float* y, int64_t r0,
                     int64_t r1) {
  int64_t r = r0;
  for (; r + 2 <= r1; r += 2) {
    const float* rows[2] = {w + r * ldw, w + (r + 1) * ldw};
    dot_rows<2, 1>(rows, &x, n, y + r);
  }
  if (r < r1) y[r] = dot_f32_avx512(w + r * ldw, x, n);
}

void gemv_q8_avx512(const int8_t* w, int64_t ldw, const float* scales, const float* x, int64_t n,
                    float* y, int64_t r0, int64_t r1) {
  int64_t r = r0;
  for (; r + 2 <= r1; r += 2) {
    const int8_t* rows[2] = {w + r * ldw, w + (r + 1) * ldw};
    float out[2];
    dot_rows<2, 1>(rows, &x, n, out);
    y[r] = out[0] * scales[r];
    y[r + 1] = out[1] * scales[r + 1];
  }
  if (r < r1) y[r] = dot_q8_avx512(w + r * ldw, scales[r], x, n);
}

void gemv_q4g64_prepared_avx512(const uint8_t* w, const float* scales, const float* xp, int64_t n,
                                float* y, int64_t r0, int64_t r1) {
  // One row at a time (a single sequential weight stream, as in AVX2).
  const int64_t groups = (n + 63) / 64;
  for (int64_t r = r0; r < r1; ++r)
    y[r] = dot_q4g64_prepared_avx512(w + r * groups * 32, scales + r * groups, xp, n);
}

void dots_f32_avx512(const float* w, const float* X, int64_t ldx, int64_t T, int64_t n, float* out,
                     int64_t out_stride) {
  for_token_batches(
      X, ldx, T, out, out_stride,
      [&](const float* const* x, float* r) { dot_rows<1, 1>(&w, x, n, r); },
      [&](const float* const* x, float* r) { dot_rows<1, 2>(&w, x, n, r); },
      [&](const float* const* x, float* r) { dot_rows<1, 3>(&w, x, n, r); },
      [&](const float* const* x, float* r) { dot_rows<1, 4>(&w, x, n, r); });
}

void dots_q8_avx512(const int8_t* w, float scale, const float* X, int64_t ldx, int64_t T, int64_t n,
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
      },
      [&](const float* const* x, float* r) {
        dot_rows<1, 4>(&w, x, n, r);
        for (int i = 0; i < 4; ++i) r[i] *= scale;
      });
}

void dots_q4g64_prepared_avx512(const uint8_t* w, const float* scales, const float* XP,
                                int64_t ldxp, int64_t T, int64_t n, float* out,
                                int64_t out_stride) {
  for_token_batches(
      XP, ldxp, T, out, out_stride,
      [&](const float* const* x, float* r) { dot_q4_rows<1, 1>(&w, &scales, x, n, r); },
      [&](const float* const* x, float* r) { dot_q4_rows<1, 2>(&w, &scales, x, n, r); },
      [&](const float* const* x, float* r) { dot_q4_rows<1, 3>(&w, &scales, x, n, r); },
      [&](const float* const* x, float* r) { dot_q4_rows<1, 4>(&w, &scales, x, n, r); });
}

}  // namespace k3::kernels
