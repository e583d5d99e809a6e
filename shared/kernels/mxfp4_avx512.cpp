// AVX-512 (F/BW/VL/DQ/VNNI) variants of shared/kernels/mxfp4.h. The only file
// of this pair compiled with the AVX-512 flags: it calls no inline or template
// code from shared headers (an AVX-512 copy of it could be picked by the
// linker), only intrinsics, plain C++ and its own file-local helpers.
//
// A 512-bit load takes 64 packed bytes: 4 groups of 32 columns of one row,
// group k in 128-bit lane k. It is split without re-interleaving:
//   lo = bytes & 15        -> lane k: the 16 even columns of group k
//   hi = (bytes >> 4) & 15 -> the 16 odd columns
// x is prepared once per call (per token) in that order. A block is 16 groups
// (512 columns, 256 packed bytes per row, 4 loads). Rows are processed one at
// a time, as one sequential stream, software-prefetched kPrefetchBytes ahead.
//
// Batched forms (matmul): f32 loads and decodes every weight block once for a
// tile of up to 4 tokens; the arithmetic applied to one (row, token) is the
// same whatever the tile (the same instructions on the same values in the
// same order, one accumulator per token), so matmul gives every result the
// bits of matvec. The q8 matmul of two or more tokens is the weight-stationary
// kernel of mxfp4_q8_batched_avx512.cpp (the same bits as this file's q8
// matvec, which a lone token still takes).
#include <immintrin.h>

#include <cstdlib>

#include "shared/kernels/mxfp4.h"
#include "shared/kernels/mxfp4_avx512_helpers.h"

namespace k3::kernels {
namespace {

// ---------------------------------------------------------------------------
// int8-activation kernel, with VNNI. vpdpbusd multiplies UNSIGNED bytes by
// SIGNED bytes: the doubled e2m1 weight w2 in {-12..12} is looked up with a +12
// offset (u = w2 + 12 in 0..24) as the unsigned operand, the activations are
// the signed one: sum(u x) = sum(w2 x) + 12 sum(x), and 12 sum(x) per group is
// precomputed with x (`corr`). Each int32 lane sums 4 products, |.| <= 4 * 24
// * 128; a group's 32 products end up in 4 lanes (even and odd columns
// accumulate into the same lanes), reduced to one exact integer group dot.
//
// After the reduction of a block's 4 loads, lane 4k + j holds the group 4j + k
// (load j, 128-bit lane k); corr, half_xs and the scales use that order.

struct alignas(64) Q8XBlock {
  int8_t even[4][64];  // load j, lane k: x[group 4j + k, 0, 2, .., 30]
  int8_t odd[4][64];   // the odd columns
  int32_t corr[16];    // 12 sum(x[g]) in reduced order
  float half_xs[16];   // 0.5 xs[g] (0.5 undoes the doubled weights), reduced order
};

// Reduced-order position -> byte of the block's 16 exponents.
[[gnu::always_inline]] inline __m128i reduced_order() {
  return _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

// Prepares groups [g0, g0 + ng) of one token into (ng + 15) / 16 blocks;
// missing groups of the last block are zero (they contribute 0 whatever the
// weight bytes).
void prepare_q8(const int8_t* xq, const float* xs, int64_t g0, int64_t ng, Q8XBlock* out) {
  for (int64_t b = 0; 16 * b < ng; ++b) {
    Q8XBlock& o = out[b];
    for (int m = 0; m < 16; ++m) {  // group position in the block: load j, lane k
      const int j = m / 4, k = m % 4;
      const int64_t g = 16 * b + m;
      int32_t sum = 0;
      for (int c = 0; c < 16; ++c) {
        const int8_t e = g < ng ? xq[32 * (g0 + g) + 2 * c] : 0;
        const int8_t d = g < ng ? xq[32 * (g0 + g) + 2 * c + 1] : 0;
        o.even[j][16 * k + c] = e;
        o.odd[j][16 * k + c] = d;
        sum += e + d;
      }
      o.corr[4 * k + j] = 12 * sum;
      o.half_xs[4 * k + j] = g < ng ? 0.5f * xs[g0 + g] : 0.0f;
    }
  }
}

// T tokens' dot products with groups [0, ng) of one row (packed bytes p,
// exponents s): out[i] for the prepared x xb[i].
template <int T>
void q8_rows(const uint8_t* p, const uint8_t* s, const Q8XBlock* const* xb, int64_t ng,
             float* out) {
  const __m512i lut = _mm512_broadcast_i32x4(
      _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  __m512 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; 16 * b < ng; ++b) {
    const uint8_t* q = p + 256 * b;
    const int64_t groups = ng - 16 * b < 16 ? ng - 16 * b : 16;
    __m512i ulo[4], uhi[4];
    if (groups == 16) {
      for (int l = 0; l < 256; l += 64)
        _mm_prefetch(reinterpret_cast<const char*>(q + kPrefetchBytes + l), _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(s + 16 * b + kPrefetchBytes / 16), _MM_HINT_T1);
    }
    for (int j = 0; j < 4; ++j) {
      // A last partial block reads only the row's bytes (masked loads do not
      // fault); the zero bytes meet zero x.
      const __m512i pk = groups == 16
                             ? _mm512_loadu_si512(q + 64 * j)
                             : _mm512_maskz_loadu_epi8(load_mask(16 * groups, j), q + 64 * j);
      ulo[j] = _mm512_shuffle_epi8(lut, _mm512_and_si512(pk, nibble));
      uhi[j] = _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(pk, 4), nibble));
    }
    const __m512 t = ue8m0_to_f32(block_exponents(s + 16 * b, groups, reduced_order()));
    for (int i = 0; i < T; ++i) {
      const Q8XBlock& x = xb[i][b];
      __m512i v[4];
      for (int j = 0; j < 4; ++j) {
        v[j] = _mm512_dpbusd_epi32(_mm512_setzero_si512(), ulo[j], _mm512_load_si512(x.even[j]));
        v[j] = _mm512_dpbusd_epi32(v[j], uhi[j], _mm512_load_si512(x.odd[j]));
      }
      const __m512i a =
          _mm512_add_epi32(_mm512_unpacklo_epi32(v[0], v[1]), _mm512_unpackhi_epi32(v[0], v[1]));
      const __m512i c =
          _mm512_add_epi32(_mm512_unpacklo_epi32(v[2], v[3]), _mm512_unpackhi_epi32(v[2], v[3]));
      const __m512i sums =
          _mm512_add_epi32(_mm512_unpacklo_epi64(a, c), _mm512_unpackhi_epi64(a, c));
      const __m512i d = _mm512_sub_epi32(sums, _mm512_load_si512(x.corr));
      acc[i] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(d), _mm512_mul_ps(t, _mm512_load_ps(x.half_xs)),
                               acc[i]);
    }
  }
  for (int i = 0; i < T; ++i) out[i] = _mm512_reduce_add_ps(acc[i]);
}

// ---------------------------------------------------------------------------
// Float kernel, on the same loads. Weights are looked up as signed doubled
// values w2 and spread to the top byte of each int32 (w2 << 24 = w * 2^25,
// exact in f32); x is prepared pre-multiplied by 2^-25 (exact unless |x| is
// below ~2^-101), so each product is exactly w * x as in the scalar reference.
// Spread q (0..3) takes bytes 4q .. 4q+3 of each lane: lane k, element d is
// column 8q + 2d (even, from lo) or 8q + 2d + 1 (odd, from hi) of group k.

struct alignas(64) F32XBlock {
  float even[4][4][16];  // load j, spread q: lane k element d = x[4j + k, 8q + 2d] * 2^-25
  float odd[4][4][16];   // column 8q + 2d + 1
};

void prepare_f32(const float* x, int64_t g0, int64_t ng, F32XBlock* out) {
  for (int64_t b = 0; 16 * b < ng; ++b)
    for (int m = 0; m < 16; ++m) {
      const int j = m / 4, k = m % 4;
      const int64_t g = 16 * b + m;
      for (int q = 0; q < 4; ++q)
        for (int d = 0; d < 4; ++d) {
          const int64_t c = 32 * (g0 + g) + 8 * q + 2 * d;
          out[b].even[j][q][4 * k + d] = g < ng ? x[c] * (1.0f / 33554432.0f) : 0.0f;
          out[b].odd[j][q][4 * k + d] = g < ng ? x[c + 1] * (1.0f / 33554432.0f) : 0.0f;
        }
    }
}

// The float kernel does more work per byte (it is not at the memory's
// speed); it keeps the distance and L1 hint it was measured with.
constexpr int64_t kF32PrefetchBytes = 2048;

template <int T>
void f32_rows(const uint8_t* p, const uint8_t* s, const F32XBlock* const* xb, int64_t ng,
              float* out) {
  const __m512i lut = _mm512_broadcast_i32x4(
      _mm_setr_epi8(0, 1, 2, 3, 4, 6, 8, 12, 0, -1, -2, -3, -4, -6, -8, -12));
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  __m512 acc[T];
  for (int i = 0; i < T; ++i) acc[i] = _mm512_setzero_ps();
  for (int64_t b = 0; 16 * b < ng; ++b) {
    const uint8_t* q = p + 256 * b;
    const int64_t groups = ng - 16 * b < 16 ? ng - 16 * b : 16;
    if (groups == 16) {
      for (int l = 0; l < 256; l += 64)
        _mm_prefetch(reinterpret_cast<const char*>(q + kF32PrefetchBytes + l), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(s + 16 * b + kF32PrefetchBytes / 16), _MM_HINT_T0);
    }
    // The 16 group scales in natural order.
    const __m512 scales = ue8m0_to_f32(block_exponents(
        s + 16 * b, groups, _mm_setr_epi8(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15)));
    for (int j = 0; j < 4; ++j) {
      const __m512i pk = groups == 16
                             ? _mm512_loadu_si512(q + 64 * j)
                             : _mm512_maskz_loadu_epi8(load_mask(16 * groups, j), q + 64 * j);
      const __m512i wl = _mm512_shuffle_epi8(lut, _mm512_and_si512(pk, nibble));
      const __m512i wh =
          _mm512_shuffle_epi8(lut, _mm512_and_si512(_mm512_srli_epi16(pk, 4), nibble));
      __m512 fe[4], fo[4];
      for (int r = 0; r < 4; ++r) {
        const __m512i idx = _mm512_or_si512(
            _mm512_broadcast_i32x4(_mm_setr_epi8(-128, -128, -128, 0, -128, -128, -128, 1, -128,
                                                 -128, -128, 2, -128, -128, -128, 3)),
            _mm512_set1_epi32(static_cast<int32_t>((4u * r) << 24)));
        fe[r] = _mm512_cvtepi32_ps(_mm512_shuffle_epi8(wl, idx));
        fo[r] = _mm512_cvtepi32_ps(_mm512_shuffle_epi8(wh, idx));
      }
      // Lane k of load j is group 4j + k: its scale in all 4 elements.
      const __m512 t = _mm512_permutexvar_ps(
          _mm512_add_epi32(_mm512_set1_epi32(4 * j),
                           _mm512_setr_epi32(0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3)),
          scales);
      for (int i = 0; i < T; ++i) {
        const F32XBlock& x = xb[i][b];
        __m512 se = _mm512_mul_ps(fe[0], _mm512_load_ps(x.even[j][0]));
        __m512 so = _mm512_mul_ps(fo[0], _mm512_load_ps(x.odd[j][0]));
        for (int r = 1; r < 4; ++r) {
          se = _mm512_fmadd_ps(fe[r], _mm512_load_ps(x.even[j][r]), se);
          so = _mm512_fmadd_ps(fo[r], _mm512_load_ps(x.odd[j][r]), so);
        }
        acc[i] = _mm512_fmadd_ps(_mm512_add_ps(se, so), t, acc[i]);
      }
    }
  }
  for (int i = 0; i < T; ++i) out[i] = _mm512_reduce_add_ps(acc[i]);
}

// ---------------------------------------------------------------------------
// Shared driver: per chunk of columns, every token's x prepared once, then
// each row once, its blocks decoded once per tile of tokens. Y[t * ldy + r];
// a matrix wider than one chunk adds the chunks' parts in order (as matvec).
template <typename XBlock>
using RowsFn = void (*)(const uint8_t*, const uint8_t*, const XBlock* const*, int64_t, float*);

// kernels[m - 1] computes a tile of m tokens, m in [1, kMaxTile].
template <int kMaxTile, typename XBlock, typename Prepare>
void matmul_driver(const Mxfp4Matrix& w, int64_t n, float* Y, int64_t ldy, int64_t r0, int64_t r1,
                   Prepare prepare, const RowsFn<XBlock>* kernels) {
  const int64_t groups = w.cols / 32;
  if (mxfp4_matmul_trivial(w, n, Y, ldy, r0, r1)) return;
  const int64_t chunk_groups = 16 * kChunkBlocks;
  const int64_t max_blocks = ((groups < chunk_groups ? groups : chunk_groups) + 15) / 16;
  XBlock* xb =
      static_cast<XBlock*>(t_scratch.get(static_cast<size_t>(n * max_blocks) * sizeof(XBlock)));
  for (int64_t g0 = 0; g0 < groups; g0 += chunk_groups) {
    const int64_t ng = groups - g0 < chunk_groups ? groups - g0 : chunk_groups;
    for (int64_t t = 0; t < n; ++t) prepare(t, g0, ng, xb + t * max_blocks);
    for (int64_t r = r0; r < r1; ++r) {
      const uint8_t* p = w.packed + r * (w.cols / 2) + 16 * g0;
      const uint8_t* s = w.scales + r * groups + g0;
      for (int64_t t = 0; t < n; t += kMaxTile) {
        const int64_t m = n - t < kMaxTile ? n - t : kMaxTile;
        const XBlock* x[kMaxTile];
        for (int64_t i = 0; i < m; ++i) x[i] = xb + (t + i) * max_blocks;
        float part[kMaxTile];
        kernels[m - 1](p, s, x, ng, part);
        for (int64_t i = 0; i < m; ++i) {
          float& y = Y[(t + i) * ldy + r];
          y = g0 == 0 ? part[i] : y + part[i];
        }
      }
    }
  }
}

// Tokens sharing one decoded weight block.
// Tokens sharing one decoded weight block (q8 here serves one token only).
constexpr int kQ8Tile = 1, kF32Tile = 4;
constexpr RowsFn<Q8XBlock> kQ8Kernels[kQ8Tile] = {q8_rows<1>};
constexpr RowsFn<F32XBlock> kF32Kernels[kF32Tile] = {f32_rows<1>, f32_rows<2>, f32_rows<3>,
                                                     f32_rows<4>};

// One token row (the matvec): the row-at-a-time kernel above, a single
// sequential stream at memory speed. Two or more: the weight-stationary
// batched kernel (mxfp4_q8_batched_avx512.cpp), which gives the same bits.
void q8_one_token(const Mxfp4Matrix& w, const int8_t* Xq, const float* Xs, float* Y, int64_t r0,
                  int64_t r1) {
  matmul_driver<kQ8Tile, Q8XBlock>(
      w, 1, Y, 0, r0, r1,
      [&](int64_t, int64_t g0, int64_t ng, Q8XBlock* out) { prepare_q8(Xq, Xs, g0, ng, out); },
      kQ8Kernels);
}

}  // namespace

void mxfp4_matmul_q8_avx512(const Mxfp4Matrix& w, const int8_t* Xq, int64_t ldxq, const float* Xs,
                            int64_t ldxs, int64_t n, float* Y, int64_t ldy, int64_t r0,
                            int64_t r1) {
  if (n >= 2)
    return mxfp4_matmul_q8_avx512_batched(w, Xq, ldxq, Xs, ldxs, n, Y, ldy, r0, r1,
                                          /*allow_vbmi=*/true);
  if (n == 1) q8_one_token(w, Xq, Xs, Y, r0, r1);
}

void mxfp4_matmul_q8_avx512_novbmi(const Mxfp4Matrix& w, const int8_t* Xq, int64_t ldxq,
                                   const float* Xs, int64_t ldxs, int64_t n, float* Y, int64_t ldy,
                                   int64_t r0, int64_t r1) {
  if (n >= 2)
    return mxfp4_matmul_q8_avx512_batched(w, Xq, ldxq, Xs, ldxs, n, Y, ldy, r0, r1,
                                          /*allow_vbmi=*/false);
  if (n == 1) q8_one_token(w, Xq, Xs, Y, r0, r1);
}

void mxfp4_matvec_q8_avx512(const Mxfp4Matrix& w, const int8_t* xq, const float* xs, float* y,
                            int64_t r0, int64_t r1) {
  mxfp4_matmul_q8_avx512(w, xq, 0, xs, 0, 1, y, 0, r0, r1);
}

void mxfp4_matmul_f32_avx512(const Mxfp4Matrix& w, const float* X, int64_t ldx, int64_t n, float* Y,
                             int64_t ldy, int64_t r0, int64_t r1) {
  matmul_driver<kF32Tile, F32XBlock>(
      w, n, Y, ldy, r0, r1,
      [&](int64_t t, int64_t g0, int64_t ng, F32XBlock* out) {
        prepare_f32(X + t * ldx, g0, ng, out);
      },
      kF32Kernels);
}

void mxfp4_matvec_f32_avx512(const Mxfp4Matrix& w, const float* x, float* y, int64_t r0,
                             int64_t r1) {
  mxfp4_matmul_f32_avx512(w, x, 0, 1, y, 0, r0, r1);
}

}  // namespace k3::kernels
