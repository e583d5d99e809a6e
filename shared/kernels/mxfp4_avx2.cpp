// AVX2/FMA variants of shared/kernels/mxfp4.h. The only file of this pair
// compiled with -mavx2 -mfma -mf16c: it calls no inline or template code from
// shared headers (an AVX2 copy of it could be picked by the linker), only
// intrinsics, plain C++ and its own file-local helpers.
//
// Both kernels take a PAIR of 32-column groups per 256-bit load (the 32
// packed bytes of groups A and B of one row) and split it without
// re-interleaving:
//   lo = bytes & 15        -> lane 0: the 16 even columns of A, lane 1: of B
//   hi = (bytes >> 4) & 15 -> the odd columns, same lanes.
// x is permuted once per call into that order (the prepared "x blocks"), so
// the per-row work is LUT shuffles and multiply-adds. Rows are processed one
// at a time, 8 groups (a block, 128 bytes) per step and two blocks per loop
// iteration: the matrix is read as one sequential stream, software-prefetched
// kPrefetchBytes ahead (measured on Zen 3: 2 or 4 interleaved row streams
// reached clearly less of the memory bandwidth than one).
//
// Batched forms (matmul): each block is loaded and decoded once for a tile of
// kTile tokens; the instructions applied to one (row, token) and their order
// do not depend on the tile, so matmul gives every result the bits of matvec.
#include <immintrin.h>

#include <cstdlib>

#include "shared/kernels/kernel_scratch.h"
#include "shared/kernels/mxfp4.h"
#include "shared/kernels/mxfp4_avx2_helpers.h"

namespace k3::kernels {
namespace {

// Columns handled per x-preparation pass (the prepared x lives on the stack,
// in L1/L2). Wider matrices take several passes over the rows, which breaks
// the sequential streaming the prefetches assume: keep every MXFP4 matrix of
// the model (<= 14336 columns) in one pass.
constexpr int64_t kChunkBlocks = 64;     // q8: 16384 columns (20 KiB)
constexpr int64_t kF32ChunkBlocks = 64;  // f32: 16384 columns (64 KiB)

// ---------------------------------------------------------------------------
// int8-activation kernel.
//
// The signed doubled e2m1 value w2 in {-12..12} is looked up with a +12 offset
// (u = w2 + 12 in 0..24), so it can be the unsigned operand of
// _mm256_maddubs_epi16 against the signed activations without a sign fix-up
// per row: sum(u x) = sum(w2 x) + 12 sum(x), and 12 sum(x) per group is
// precomputed with x (`corr`). No int16 saturation: |u x| <= 24 * 128, and the
// sum of the even- and odd-column products over 4 columns is <= 12288.
// (Same idea as the usual "bias the unsigned operand" trick of int8 GEMMs,
// e.g. oneDNN's s8s8 compensation.)

// A block is 8 groups (256 columns, 128 packed bytes per row) as 4 pairs of
// groups; pair k holds groups 2k (A, lane 0) and 2k + 1 (B, lane 1). After the
// multiply-adds the 4 pair vectors are reduced to one vector of the 8 group
// sums in the order [g0 g2 g4 g6 | g1 g3 g5 g7], then scaled and accumulated
// with one convert and one FMA per block.

// x of one block, arranged like the weight lanes.
struct alignas(32) Q8XBlock {
  int8_t even[4][32];  // pair k, lane 0: x[A, 0, 2, .., 30]; lane 1: x[B, 0, 2, .., 30]
  int8_t odd[4][32];   // the odd columns
  int32_t corr[8];     // 12 sum(x[g]) per group, block order [g0 g2 g4 g6 | g1 g3 g5 g7]
  float half_xs[8];    // 0.5 xs[g] (0.5 undoes the doubled weights), block order
};

// Group position in the block -> lane of the reduced vector.
constexpr int kBlockLane[8] = {0, 4, 1, 5, 2, 6, 3, 7};

// Even bytes of each 16-byte lane first, then the odd ones.
[[gnu::always_inline]] inline __m256i deinterleave_lanes(__m256i v) {
  const __m256i idx = _mm256_setr_epi8(0, 2, 4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15, 0, 2,
                                       4, 6, 8, 10, 12, 14, 1, 3, 5, 7, 9, 11, 13, 15);
  // -> [even 0..14 | odd 1..15 | even 16..30 | odd 17..31] as qwords 0..3.
  return _mm256_permute4x64_epi64(_mm256_shuffle_epi8(v, idx), 0xd8);  // qwords 0, 2, 1, 3
}

// How far ahead of the loads the rows are prefetched: the kernels
// stream each row sequentially.
constexpr int64_t kPrefetchBytes = 2048;

// One block of one row decoded: the biased weights u of its 4 pairs, even
// (lo) and odd (hi) columns.
struct Q8WBlock {
  __m256i lo[4], hi[4];
};

[[gnu::always_inline]] inline Q8WBlock q8_decode(const uint8_t* p) {
  const __m256i lut = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,
                                       12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  Q8WBlock wb;
  for (int k = 0; k < 4; ++k) {
    const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * k));
    wb.lo[k] = _mm256_shuffle_epi8(lut, _mm256_and_si256(packed, nibble));
    wb.hi[k] = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble));
  }
  return wb;
}

// Products of one decoded pair with one x pair: 16 int16 sums u * x over 4
// columns (lanes 0-7 group A, 8-15 group B), each |.| <= 4 * 24 * 128 = 12288.
[[gnu::always_inline]] inline __m256i q8_pair(__m256i ulo, __m256i uhi, const int8_t* x_even,
                                              const int8_t* x_odd) {
  const __m256i pe =
      _mm256_maddubs_epi16(ulo, _mm256_load_si256(reinterpret_cast<const __m256i*>(x_even)));
  const __m256i po =
      _mm256_maddubs_epi16(uhi, _mm256_load_si256(reinterpret_cast<const __m256i*>(x_odd)));
  return _mm256_add_epi16(pe, po);
}

// Two pairs' int16 sums -> int32 [A0 A1 A0 A1 | B0 B1 B0 B1] partial sums.
// The int16 adds sum two values of the same group: |.| <= 24576, no overflow.
[[gnu::always_inline]] inline __m256i reduce_pairs(__m256i p0, __m256i p1) {
  const __m256i s = _mm256_add_epi16(_mm256_unpacklo_epi32(p0, p1), _mm256_unpackhi_epi32(p0, p1));
  return _mm256_madd_epi16(s, _mm256_set1_epi16(1));
}

// The 4 pairs' int16 sums of a block -> int32 [A0 A1 A2 A3 | B0 B1 B2 B3],
// i.e. the group sums in block order.
[[gnu::always_inline]] inline __m256i reduce_block(__m256i p0, __m256i p1, __m256i p2, __m256i p3) {
  const __m256i m01 = reduce_pairs(p0, p1), m23 = reduce_pairs(p2, p3);
  return _mm256_add_epi32(_mm256_unpacklo_epi64(m01, m23), _mm256_unpackhi_epi64(m01, m23));
}

// Prepares groups [g0, g0 + ng) of x into (ng + 7) / 8 blocks; missing groups
// of the last block are zero (they contribute 0 whatever the weight bytes).
void prepare_q8(const int8_t* xq, const float* xs, int64_t g0, int64_t ng, Q8XBlock* out) {
  const __m256i twelve = _mm256_set1_epi8(12);
  for (int64_t b = 0; 8 * b < ng; ++b) {
    Q8XBlock& o = out[b];
    __m256i c[4];
    for (int k = 0; k < 4; ++k) {
      __m256i v[2];
      for (int h = 0; h < 2; ++h) {
        const int64_t g = 8 * b + 2 * k + h;  // relative to g0
        v[h] = g < ng ? deinterleave_lanes(_mm256_loadu_si256(
                            reinterpret_cast<const __m256i*>(xq + 32 * (g0 + g))))
                      : _mm256_setzero_si256();
      }
      const __m256i even = _mm256_permute2x128_si256(v[0], v[1], 0x20);
      const __m256i odd = _mm256_permute2x128_si256(v[0], v[1], 0x31);
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.even[k]), even);
      _mm256_store_si256(reinterpret_cast<__m256i*>(o.odd[k]), odd);
      // The kernel's sums with u = 12 for every weight.
      c[k] =
          _mm256_add_epi16(_mm256_maddubs_epi16(twelve, even), _mm256_maddubs_epi16(twelve, odd));
    }
    _mm256_store_si256(reinterpret_cast<__m256i*>(o.corr), reduce_block(c[0], c[1], c[2], c[3]));
    for (int j = 0; j < 8; ++j) {
      const int64_t g = 8 * b + j;
      o.half_xs[kBlockLane[j]] = g < ng ? 0.5f * xs[g0 + g] : 0.0f;
    }
  }
}

[[gnu::always_inline]] inline __m256 q8_block(const Q8WBlock& wb, __m256 t, const Q8XBlock& x,
                                              __m256 acc) {
  const __m256i p0 = q8_pair(wb.lo[0], wb.hi[0], x.even[0], x.odd[0]);
  const __m256i p1 = q8_pair(wb.lo[1], wb.hi[1], x.even[1], x.odd[1]);
  const __m256i p2 = q8_pair(wb.lo[2], wb.hi[2], x.even[2], x.odd[2]);
  const __m256i p3 = q8_pair(wb.lo[3], wb.hi[3], x.even[3], x.odd[3]);
  const __m256i d = _mm256_sub_epi32(reduce_block(p0, p1, p2, p3),
                                     _mm256_load_si256(reinterpret_cast<const __m256i*>(x.corr)));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_mul_ps(t, _mm256_load_ps(x.half_xs)), acc);
}

// Dot products of one row (packed bytes p, scales s of groups [g0, g0 + ng))
// with T prepared tokens xb[i]: out[i]. Each block is decoded once for the T
// tokens; the arithmetic of one token does not depend on T.
template <int T>
void q8_rows(const uint8_t* p, const uint8_t* s, const Q8XBlock* const* xb, int64_t ng,
             float* out) {
  __m256 acc0[T], acc1[T];
  for (int i = 0; i < T; ++i) acc0[i] = acc1[i] = _mm256_setzero_ps();
  const int64_t blocks = ng / 8;
  int64_t b = 0;
  for (; b + 2 <= blocks; b += 2) {
    const uint8_t* q = p + 128 * b;
    _mm_prefetch(reinterpret_cast<const char*>(q + kPrefetchBytes), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(q + kPrefetchBytes + 64), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(q + kPrefetchBytes + 128), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(q + kPrefetchBytes + 192), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(s + 8 * b + kPrefetchBytes / 16), _MM_HINT_T0);
    const Q8WBlock w0 = q8_decode(q);
    const __m256 t0 = block_scales(s + 8 * b);
    for (int i = 0; i < T; ++i) acc0[i] = q8_block(w0, t0, xb[i][b], acc0[i]);
    const Q8WBlock w1 = q8_decode(q + 128);
    const __m256 t1 = block_scales(s + 8 * b + 8);
    for (int i = 0; i < T; ++i) acc1[i] = q8_block(w1, t1, xb[i][b + 1], acc1[i]);
  }
  for (; b < blocks; ++b) {
    const Q8WBlock w0 = q8_decode(p + 128 * b);
    const __m256 t0 = block_scales(s + 8 * b);
    for (int i = 0; i < T; ++i) acc0[i] = q8_block(w0, t0, xb[i][b], acc0[i]);
  }
  const int64_t left = ng - 8 * blocks;
  if (left > 0) {  // a last partial block: never read past the row
    alignas(32) uint8_t pk[128];
    uint8_t sc[8];
    for (int i = 0; i < 128; ++i) pk[i] = i < 16 * left ? p[128 * blocks + i] : 0;
    for (int i = 0; i < 8; ++i) sc[i] = i < left ? s[8 * blocks + i] : 127;  // x is 0 there
    const Q8WBlock w0 = q8_decode(pk);
    const __m256 t0 = block_scales(sc);
    for (int i = 0; i < T; ++i) acc1[i] = q8_block(w0, t0, xb[i][blocks], acc1[i]);
  }
  for (int i = 0; i < T; ++i) out[i] = hsum(_mm256_add_ps(acc0[i], acc1[i]));
}

// ---------------------------------------------------------------------------
// Float kernel, on the same blocks. Weights are looked up as signed doubled
// values w2 and spread to the top byte of each int32 (w2 << 24 = w * 2^25,
// exact in f32); x is prepared pre-multiplied by 2^-25 (exact unless |x| is
// below ~2^-101), so each product is exactly w * x as in the scalar reference.

// x of one block in the order the spread shuffles produce, for pair k:
// v[k][j]     (j < 4): A cols 8j, 8j+2, 8j+4, 8j+6 | B same   (even, from lo)
// v[k][4 + j] (j < 4): A cols 8j+1, .., 8j+7       | B same   (odd, from hi)
struct alignas(32) F32XBlock {
  float v[4][8][8];
};

void prepare_f32(const float* x, int64_t g0, int64_t ng, F32XBlock* out) {
  const __m256 k2m25 = _mm256_set1_ps(1.0f / 33554432.0f);  // 2^-25
  const __m256i even_odd = _mm256_setr_epi32(0, 2, 4, 6, 1, 3, 5, 7);
  for (int64_t b = 0; 8 * b < ng; ++b)
    for (int k = 0; k < 4; ++k)
      for (int h = 0; h < 2; ++h) {  // group A (lanes 0-3), B (lanes 4-7)
        const int64_t g = 8 * b + 2 * k + h;
        for (int j = 0; j < 4; ++j) {
          // cols 8j .. 8j+7 -> [8j, 8j+2, 8j+4, 8j+6 | 8j+1, .., 8j+7] * 2^-25
          const __m256 v =
              g < ng ? _mm256_mul_ps(_mm256_permutevar8x32_ps(
                                         _mm256_loadu_ps(x + 32 * (g0 + g) + 8 * j), even_odd),
                                     k2m25)
                     : _mm256_setzero_ps();
          _mm_store_ps(&out[b].v[k][j][4 * h], _mm256_castps256_ps128(v));
          _mm_store_ps(&out[b].v[k][4 + j][4 * h], _mm256_extractf128_ps(v, 1));
        }
      }
}

// One pair of one row decoded: the weights w * 2^25 as floats, spread j of
// the even (lo) and odd (hi) columns.
struct F32WPair {
  __m256 e[4], o[4];
};

[[gnu::always_inline]] inline F32WPair f32_decode(const uint8_t* p) {
  const __m256i lut = _mm256_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12, 0,
                                       1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  const __m256i packed = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p));
  const __m256i wl = _mm256_shuffle_epi8(lut, _mm256_and_si256(packed, nibble));
  const __m256i wh =
      _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(packed, 4), nibble));
  F32WPair wp;
  for (int j = 0; j < 4; ++j) {
    // Bytes 4j .. 4j+3 of each lane to the top byte of dwords 0..3.
    const __m256i idx =
        _mm256_or_si256(_mm256_setr_epi8(-128, -128, -128, 0, -128, -128, -128, 1, -128, -128, -128,
                                         2, -128, -128, -128, 3, -128, -128, -128, 0, -128, -128,
                                         -128, 1, -128, -128, -128, 2, -128, -128, -128, 3),
                        _mm256_set1_epi32(static_cast<int32_t>((4u * j) << 24)));
    wp.e[j] = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(wl, idx));
    wp.o[j] = _mm256_cvtepi32_ps(_mm256_shuffle_epi8(wh, idx));
  }
  return wp;
}

// Sums of w * x of one decoded pair with one x pair: lanes 0-3 group A, 4-7 B.
[[gnu::always_inline]] inline __m256 f32_pair(const F32WPair& wp, const float (*xv)[8]) {
  __m256 se = _mm256_setzero_ps(), so = se;
  for (int j = 0; j < 4; ++j) {
    se = _mm256_fmadd_ps(wp.e[j], _mm256_load_ps(xv[j]), se);
    so = _mm256_fmadd_ps(wp.o[j], _mm256_load_ps(xv[4 + j]), so);
  }
  return _mm256_add_ps(se, so);
}

// Group scales of a pair as (t[A] x4, t[B] x4); NaN for exponent 255.
[[gnu::always_inline]] inline __m256 pair_scale(const uint8_t* s) {
  return _mm256_blend_ps(_mm256_broadcast_ss(&kUe8m0Scale.v[s[0]]),
                         _mm256_broadcast_ss(&kUe8m0Scale.v[s[1]]), 0xf0);
}

// Adds one block of one row to T tokens, each pair decoded once and scaled by
// its two group scales.
template <int T>
[[gnu::always_inline]] inline void f32_block(const uint8_t* p, const uint8_t* s,
                                             const F32XBlock* const* xb, int64_t b, __m256* acc0,
                                             __m256* acc1) {
  for (int k = 0; k < 4; k += 2) {
    const F32WPair w0 = f32_decode(p + 32 * k);
    const __m256 t0 = pair_scale(s + 2 * k);
    for (int i = 0; i < T; ++i) acc0[i] = _mm256_fmadd_ps(f32_pair(w0, xb[i][b].v[k]), t0, acc0[i]);
    const F32WPair w1 = f32_decode(p + 32 * k + 32);
    const __m256 t1 = pair_scale(s + 2 * k + 2);
    for (int i = 0; i < T; ++i)
      acc1[i] = _mm256_fmadd_ps(f32_pair(w1, xb[i][b].v[k + 1]), t1, acc1[i]);
  }
}

template <int T>
void f32_rows(const uint8_t* p, const uint8_t* s, const F32XBlock* const* xb, int64_t ng,
              float* out) {
  __m256 acc0[T], acc1[T];
  for (int i = 0; i < T; ++i) acc0[i] = acc1[i] = _mm256_setzero_ps();
  const int64_t blocks = ng / 8;
  for (int64_t b = 0; b < blocks; ++b) {
    const uint8_t* q = p + 128 * b;
    _mm_prefetch(reinterpret_cast<const char*>(q + kPrefetchBytes), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(q + kPrefetchBytes + 64), _MM_HINT_T0);
    _mm_prefetch(reinterpret_cast<const char*>(s + 8 * b + kPrefetchBytes / 16), _MM_HINT_T0);
    f32_block<T>(q, s + 8 * b, xb, b, acc0, acc1);
  }
  const int64_t left = ng - 8 * blocks;
  if (left > 0) {  // a last partial block: never read past the row
    alignas(32) uint8_t pk[128];
    uint8_t sc[8];
    for (int i = 0; i < 128; ++i) pk[i] = i < 16 * left ? p[128 * blocks + i] : 0;
    for (int i = 0; i < 8; ++i) sc[i] = i < left ? s[8 * blocks + i] : 127;  // x is 0 there
    f32_block<T>(pk, sc, xb, blocks, acc0, acc1);
  }
  for (int i = 0; i < T; ++i) out[i] = hsum(_mm256_add_ps(acc0[i], acc1[i]));
}

// Tokens sharing one decoded weight block.
constexpr int kTile = 4;

// Per chunk of columns, every token's x prepared once, then each row once, its
// blocks decoded once per tile of tokens: Y[t * ldy + r]. A matrix wider than
// one chunk adds the chunks' parts in order.
template <typename XBlock, typename Prepare, typename Rows1, typename Rows2, typename Rows3,
          typename Rows4>
void matmul_driver(const Mxfp4Matrix& w, int64_t n, float* Y, int64_t ldy, int64_t r0, int64_t r1,
                   int64_t chunk_blocks, Prepare prepare, Rows1 rows1, Rows2 rows2, Rows3 rows3,
                   Rows4 rows4) {
  const int64_t groups = w.cols / 32;
  if (mxfp4_matmul_trivial(w, n, Y, ldy, r0, r1)) return;
  const int64_t chunk_groups = 8 * chunk_blocks;
  const int64_t max_blocks = ((groups < chunk_groups ? groups : chunk_groups) + 7) / 8;
  XBlock* xb =
      static_cast<XBlock*>(t_scratch.get(static_cast<size_t>(n * max_blocks) * sizeof(XBlock)));
  for (int64_t g0 = 0; g0 < groups; g0 += chunk_groups) {
    const int64_t ng = groups - g0 < chunk_groups ? groups - g0 : chunk_groups;
    for (int64_t t = 0; t < n; ++t) prepare(t, g0, ng, xb + t * max_blocks);
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* p = w.packed + r * (w.cols / 2) + 16 * g0;
      const uint8_t* s = w.scales + r * groups + g0;
      for (int64_t t = 0; t < n; t += kTile) {
        const int64_t m = n - t < kTile ? n - t : kTile;
        const XBlock* x[kTile];
        for (int64_t i = 0; i < m; ++i) x[i] = xb + (t + i) * max_blocks;
        float part[kTile];
        if (m == 4)
          rows4(p, s, x, ng, part);
        else if (m == 3)
          rows3(p, s, x, ng, part);
        else if (m == 2)
          rows2(p, s, x, ng, part);
        else
          rows1(p, s, x, ng, part);
        for (int64_t i = 0; i < m; ++i) {
          float& y = Y[(t + i) * ldy + r];
          y = g0 == 0 ? part[i] : y + part[i];
        }
      }
    }
  }
}

}  // namespace

void mxfp4_matmul_q8_avx2(const Mxfp4Matrix& w, const int8_t* Xq, int64_t ldxq, const float* Xs,
                          int64_t ldxs, int64_t n, float* Y, int64_t ldy, int64_t r0, int64_t r1) {
  // Two or more tokens: the weight-stationary kernel (the same bits), which
  // decodes each block once for all of them and reduces no group per token.
  if (n >= 2) return mxfp4_matmul_q8_avx2_batched(w, Xq, ldxq, Xs, ldxs, n, Y, ldy, r0, r1);
  matmul_driver<Q8XBlock>(
      w, n, Y, ldy, r0, r1, kChunkBlocks,
      [&](int64_t t, int64_t g0, int64_t ng, Q8XBlock* out) {
        prepare_q8(Xq + t * ldxq, Xs + t * ldxs, g0, ng, out);
      },
      q8_rows<1>, q8_rows<2>, q8_rows<3>, q8_rows<4>);
}

void mxfp4_matvec_q8_avx2(const Mxfp4Matrix& w, const int8_t* xq, const float* xs, float* y,
                          int64_t r0, int64_t r1) {
  mxfp4_matmul_q8_avx2(w, xq, 0, xs, 0, 1, y, 0, r0, r1);
}

void mxfp4_matmul_f32_avx2(const Mxfp4Matrix& w, const float* X, int64_t ldx, int64_t n, float* Y,
                           int64_t ldy, int64_t r0, int64_t r1) {
  matmul_driver<F32XBlock>(
      w, n, Y, ldy, r0, r1, kF32ChunkBlocks,
      [&](int64_t t, int64_t g0, int64_t ng, F32XBlock* out) {
        prepare_f32(X + t * ldx, g0, ng, out);
      },
      f32_rows<1>, f32_rows<2>, f32_rows<3>, f32_rows<4>);
}

void mxfp4_matvec_f32_avx2(const Mxfp4Matrix& w, const float* x, float* y, int64_t r0, int64_t r1) {
  mxfp4_matmul_f32_avx2(w, x, 0, 1, y, 0, r0, r1);
}

}  // namespace k3::kernels
