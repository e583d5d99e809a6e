// AVX-512 tiled GEMM forms of the dense kernels (shared/kernels/dense.h):
// many tokens against rows of one matrix, blocked for registers, L1 and L2,
// each result with exactly the bits of the single dot of dense_avx512.cpp
// (dot_f32_avx512, dot_q8_avx512, dot_q4g64_prepared_avx512). Like that
// file, the only code here is intrinsics, plain C++ and file-local helpers.
//
// How the per-result arithmetic is kept:
//  - f32 and int8: the single dot keeps four accumulators a0..a3, a_j taking
//    columns 64 i + 16 j .. +15 of every whole 64-column block in ascending
//    i, then a0 the 16-column blocks after them, a1 the masked tail, and
//    returns reduce(a0 + a1 + (a2 + a3)) (int8: times the row scale). Each
//    a_j is an independent chain of FMAs, so here the j run one after the
//    other (one register per (row, token) instead of four: a 4 x 6 register
//    tile), and a chain is stored to memory between column blocks and
//    reloaded, which changes no bit. int8 weights are widened to f32 in
//    registers, as the single dot does (so a row block of int8 takes a
//    quarter of the cache an f32 copy would: on Zen 5, one thread, 7168
//    columns, 84 G multiply-adds/s against 63 for a widened copy in L2).
//  - int4: per pair of groups, se = sum_k fe_k * xe_k and so = sum_k fo_k *
//    xo_k (a product, then FMAs, k = 0..3), acc = fma(se + so, scale, acc),
//    reduced at the end. The tile decodes the nibbles in registers and runs
//    the per-pair arithmetic of dense_avx512_helpers.h, the single dot's
//    own. (A copy decoded to f32 once per row block, 4.5 bytes a weight,
//    ran slower: one thread, 7168 columns, 62 against 72 G multiply-adds/s,
//    and 12288 columns 46 against 66, its row blocks being 4 times shorter.)
//
// Blocking: a row block of up to kMaxRowBlock rows (their weights, read
// from RAM once, stay in L2), then tiles of tokens, then column blocks (the
// tokens' activations of one column block stay in L1 while every row tile of
// the row block passes over them), accumulators held between column blocks
// in a small per-thread buffer.
#include <immintrin.h>

#include <cstdint>
#include <type_traits>

#include "shared/kernels/dense.h"
#include "shared/kernels/dense_avx512_helpers.h"
#include "shared/kernels/kernel_scratch.h"

namespace k3::kernels {
namespace {

// Register tiles (results kept in zmm registers while a column block passes):
// f32/int8 4 rows x 6 tokens, one chain each (24 registers); int4 1 row x
// 4 tokens (acc, se, so: 12 registers, besides the pair's nibbles and
// spreads).
constexpr int kRows = 4;
constexpr int kTokens = 6;
constexpr int kQ4Rows = 1;
constexpr int kQ4Tokens = 4;
// Row blocks: at most kMaxRowBlock rows, fewer when their weights would pass
// kRowBlockBytes (they stay in L2 while every token tile passes over them);
// a multiple of both tiles' rows.
// The activations of all tokens stream from L3 once per row block, so taller
// is better while the block fits: int8 rows of 7168 columns, 2 threads, 32
// rows ran at 139-154 G multiply-adds/s where 16 gave 125-141; 128 rows (the
// byte bound then decides: int4 7168 columns 128 rows, int8 72) against 32,
// same process, 2 threads, n = 256: int4 12288x7168 111 against 105,
// 7168x12288 107 against 102; int8 12288x7168 121 against 119, 7168x12288
// 110 against 98.
constexpr int64_t kMaxRowBlock = 128;
constexpr int64_t kRowBlockBytes = 512 << 10;
// Column blocks: the activations of one token tile over one column block
// stay in L1 (6 tokens x 1024 columns x 4 bytes, 4 tokens x 8 pairs x 512
// bytes) while the row tiles of the row block pass over them.
constexpr int64_t kColBlock = 1024;  // f32/int8 columns (a multiple of 64)
constexpr int64_t kPairBlock = 8;    // int4 pairs of groups (128 columns each)

// Rows per row block for rows of `row_bytes` bytes.
int64_t row_block(int64_t row_bytes) {
  int64_t rb = kRowBlockBytes / (row_bytes > 0 ? row_bytes : 1);
  rb = rb < kMaxRowBlock ? rb : kMaxRowBlock;
  rb = rb / kRows * kRows;
  return rb > kRows ? rb : kRows;
}

[[gnu::always_inline]] inline __mmask16 tail_mask(int64_t len) {
  return static_cast<__mmask16>((1u << len) - 1);
}

// The accumulators held between column blocks, in the per-thread scratch
// (kernel_scratch.h).
__m512* scratch(int64_t vectors) {
  return static_cast<__m512*>(t_scratch.get(static_cast<size_t>(vectors) * sizeof(__m512)));
}

// ---------------------------------------------------------------------------
// f32 / int8

// 16 weights as f32 (lanes outside m: 0, nothing read there).
[[gnu::always_inline]] inline __m512 load_w(const float* w, __mmask16 m) {
  return _mm512_maskz_loadu_ps(m, w);
}
[[gnu::always_inline]] inline __m512 load_w(const int8_t* w, __mmask16 m) {
  return _mm512_cvtepi32_ps(_mm512_cvtepi8_epi32(_mm_maskz_loadu_epi8(m, w)));
}

// For every chain j: R rows x T tokens over the 64-column blocks [k0, e64),
// then (last) the 16-column blocks or the tail chain j owns. acc holds chain
// j of result (r, t) at acc[(r * kTokens + t) * 4 + j].

template <typename W, int R, int T>
void fma_tile(const W* w, int64_t ldw, const float* const* x, int64_t k0, int64_t e64, int64_t n,
              bool first, bool last, __m512* acc) {
  const int64_t n64 = n / 64 * 64, n16 = n / 16 * 16;
  for (int j = 0; j < 4; ++j) {
    __m512 a[R][T];
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t)
        a[r][t] = first ? _mm512_setzero_ps() : acc[(r * kTokens + t) * 4 + j];
    // Columns [i, i + 16) into every chain j of the tile (m: the lanes read).
    const auto step = [&](int64_t i, __mmask16 m) {
      __m512 wv[R];
      for (int r = 0; r < R; ++r) wv[r] = load_w(w + r * ldw + i, m);
      for (int t = 0; t < T; ++t) {
        const __m512 xv = _mm512_maskz_loadu_ps(m, x[t] + i);
        for (int r = 0; r < R; ++r) a[r][t] = _mm512_fmadd_ps(wv[r], xv, a[r][t]);
      }
    };
    for (int64_t i = k0 + 16 * j; i < e64; i += 64) step(i, 0xffff);
    if (last && j == 0)
      for (int64_t i = n64; i + 16 <= n; i += 16) step(i, 0xffff);
    if (last && j == 1 && n16 < n) step(n16, tail_mask(n - n16));
    for (int r = 0; r < R; ++r)
      for (int t = 0; t < T; ++t) acc[(r * kTokens + t) * 4 + j] = a[r][t];
  }
}

template <typename W>
struct FmaTiles {
  template <int R, int T>
  struct Of {
    static constexpr auto run = fma_tile<W, R, T>;
  };
};

// Tile<R, T>::run for R = r in [1, RMax] and T = t in [1, TMax].
template <template <int, int> class Tile, int RMax, int TMax, int R = 1, int T = 1>
auto tile_for(int64_t r, int64_t t) {
  if constexpr (R < RMax)
    if (r != R) return tile_for<Tile, RMax, TMax, R + 1, T>(r, t);
  if constexpr (T < TMax)
    if (t != T) return tile_for<Tile, RMax, TMax, R, T + 1>(r, t);
  return Tile<R, T>::run;
}

// Rows [r0, r1) of f32 or int8 rows w (ldw apart; int8: scales, one per
// row, multiplied last).
template <typename W>
void gemm_rows(const W* w, int64_t ldw, const float* scales, const float* X, int64_t ldx, int64_t T,
               int64_t n, float* Y, int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t block = row_block(((n + 15) / 16 * 16) * static_cast<int64_t>(sizeof(W)));
  __m512* const acc = scratch(block * kTokens * 4);
  const int64_t n64 = n / 64 * 64;
  for (int64_t b0 = r0; b0 < r1; b0 += block) {
    const int64_t rb = r1 - b0 < block ? r1 - b0 : block;
    const W* wb = w + b0 * ldw;
    const int64_t ldb = ldw;
    for (int64_t t0 = 0; t0 < T; t0 += kTokens) {
      const int64_t tt = T - t0 < kTokens ? T - t0 : kTokens;
      const float* x[kTokens];
      for (int64_t t = 0; t < tt; ++t) x[t] = X + (t0 + t) * ldx;
      const auto full = tile_for<FmaTiles<W>::template Of, kRows, kTokens>(kRows, tt);
      int64_t k0 = 0;
      do {
        const int64_t e64 = n64 - k0 > kColBlock ? k0 + kColBlock : n64;
        const bool last = e64 == n64;
        for (int64_t r = 0; r < rb; r += kRows) {
          const int64_t rr = rb - r < kRows ? rb - r : kRows;
          (rr == kRows ? full : tile_for<FmaTiles<W>::template Of, kRows, kTokens>(rr, tt))(
              wb + r * ldb, ldb, x, k0, e64, n, k0 == 0, last, acc + r * kTokens * 4);
        }
        k0 = e64;
      } while (k0 < n64);
      for (int64_t r = 0; r < rb; ++r)
        for (int64_t t = 0; t < tt; ++t) {
          const __m512* a = acc + (r * kTokens + t) * 4;
          // r: tile-relative rows are laid out kTokens * 4 apart per row.
          float v = _mm512_reduce_add_ps(
              _mm512_add_ps(_mm512_add_ps(a[0], a[1]), _mm512_add_ps(a[2], a[3])));
          if constexpr (!std::is_same_v<W, float>) v *= scales[b0 + r];
          Y[(t0 + t) * ldy + b0 + r] = v;
        }
    }
  }
}

// ---------------------------------------------------------------------------
// int4

// Pairs [p0, p1) of R rows (packed bytes w, `groups` scales per row, rows
// one after the other) for T prepared tokens xp[t] (128 floats per pair,
// indexed by absolute pair), decoded in registers as the single dot does;
// acc[r * kQ4Tokens + t] between column blocks.
template <int R, int T>
void q4_tile(const uint8_t* w, const float* scales, int64_t groups, const float* const* xp,
             int64_t p0, int64_t p1, bool first, __m512* acc) {
  __m512 a[R * T];
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) a[r * T + t] = first ? _mm512_setzero_ps() : acc[r * kQ4Tokens + t];
  for (int64_t p = p0; p < p1; ++p) {
    Q4Pair pair[R];
    __m512 scale[R];
    for (int r = 0; r < R; ++r) {
      pair[r] = load_q4_pair(w + r * groups * 32, scales + r * groups, groups, p);
      scale[r] = pair[r].scale;
    }
    q4_pair_fma<R, T>([&](int r, int k) { return q4_spread(pair[r].lo, k); },
                      [&](int r, int k) { return q4_spread(pair[r].hi, k); }, scale, xp, p, a);
  }
  for (int r = 0; r < R; ++r)
    for (int t = 0; t < T; ++t) acc[r * kQ4Tokens + t] = a[r * T + t];
}

template <int R, int T>
struct Q4TileOf {
  static constexpr auto run = q4_tile<R, T>;
};

}  // namespace

void gemm_q4g64_prepared_avx512(const uint8_t* w, const float* scales, const float* XP,
                                int64_t ldxp, int64_t T, int64_t n, float* Y, int64_t ldy,
                                int64_t r0, int64_t r1) {
  const int64_t groups = (n + 63) / 64, pairs = (groups + 1) / 2;
  const int64_t block = row_block(groups * 36);  // packed bytes and scales
  __m512* acc = scratch(block * kQ4Tokens);
  for (int64_t b0 = r0; b0 < r1; b0 += block) {
    const int64_t rb = r1 - b0 < block ? r1 - b0 : block;
    for (int64_t t0 = 0; t0 < T; t0 += kQ4Tokens) {
      const int64_t tt = T - t0 < kQ4Tokens ? T - t0 : kQ4Tokens;
      const float* xp[kQ4Tokens];
      for (int64_t t = 0; t < tt; ++t) xp[t] = XP + (t0 + t) * ldxp;
      for (int64_t p0 = 0; p0 < pairs; p0 += kPairBlock) {
        const int64_t p1 = pairs - p0 > kPairBlock ? p0 + kPairBlock : pairs;
        for (int64_t r = 0; r < rb; r += kQ4Rows) {
          const int64_t rr = rb - r < kQ4Rows ? rb - r : kQ4Rows;
          tile_for<Q4TileOf, kQ4Rows, kQ4Tokens>(rr, tt)(w + (b0 + r) * groups * 32,
                                                         scales + (b0 + r) * groups, groups, xp, p0,
                                                         p1, p0 == 0, acc + r * kQ4Tokens);
        }
      }
      for (int64_t r = 0; r < rb; ++r)
        for (int64_t t = 0; t < tt; ++t)
          Y[(t0 + t) * ldy + b0 + r] = _mm512_reduce_add_ps(acc[r * kQ4Tokens + t]);
    }
  }
}

void gemm_f32_avx512(const float* w, int64_t ldw, const float* X, int64_t ldx, int64_t T, int64_t n,
                     float* Y, int64_t ldy, int64_t r0, int64_t r1) {
  gemm_rows(w, ldw, nullptr, X, ldx, T, n, Y, ldy, r0, r1);
}

void gemm_q8_avx512(const int8_t* w, int64_t ldw, const float* scales, const float* X, int64_t ldx,
                    int64_t T, int64_t n, float* Y, int64_t ldy, int64_t r0, int64_t r1) {
  gemm_rows(w, ldw, scales, X, ldx, T, n, Y, ldy, r0, r1);
}

}  // namespace k3::kernels
