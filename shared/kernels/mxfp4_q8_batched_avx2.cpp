// The batched AVX2 int8-activation MXFP4 kernel (shared/kernels/mxfp4.h,
// mxfp4_matmul_q8_avx2 for n >= 2 token rows; one token row takes the matvec
// of mxfp4_avx2.cpp, whose bits this reproduces). Like every *_avx2.cpp
// file, compiled with -mavx2 -mfma -mf16c and calling no inline or template
// code from shared headers, only intrinsics, plain C++ and its own file-local
// helpers.
//
// Weight-stationary: a block (8 groups of 32 columns, 128 packed bytes per
// row, 4 loads of 32 bytes: load k holds groups 2k and 2k + 1, one per
// 128-bit lane) is loaded, transposed and decoded once, then every token
// streams past it. The transposition is 4x4 dwords inside each 128-bit lane,
// so that dword (lane h, index k) of transposed vector q holds packed bytes
// 4q .. 4q+3 of ONE group, 2k + h (columns 8q .. 8q+7: low nibbles even, high
// nibbles odd): the lane order [g0 g2 g4 g6 | g1 g3 g5 g7] the matvec reduces
// its group sums to. Per token a block then costs 8 vpmaddubsw, int16 adds
// (the 4 even-column and the 4 odd-column products of a dword each sum to
// |.| <= 4 * 2 * 24 * 128 = 24576: no saturation), 2 vpmaddwd and no
// shuffle, against the matvec's per-block reduction of 6 unpacks.
//
// Bits: the exact integer group sums u . x - 12 sum(x) land in the lanes the
// matvec's reduction gives them, and the float work applied to one (row,
// token) is the matvec's, in its order: per block one convert, one multiply
// by the block's scales times 0.5 xs and one FMA into accumulator 0 (full
// blocks of even index) or 1 (odd index, and a last partial block), the row
// ending as hsum(acc0 + acc1); a matrix wider than one chunk adds the
// chunks' sums in order.
#include <immintrin.h>

#include <cstdint>
#include <cstring>

#include "shared/kernels/kernel_scratch.h"
#include "shared/kernels/mxfp4.h"
#include "shared/kernels/mxfp4_avx2_helpers.h"

namespace k3::kernels {
namespace {

// Columns per x-preparation pass, as the matvec (kChunkBlocks there).
constexpr int64_t kChunkBlocks = 64;  // 16384 columns
// The same block of a row at least this far ahead (whole passes of rows) is
// prefetched into L2, as the AVX-512 batched kernel does.
constexpr int64_t kPrefetchBytes = 4096;
// Rows per pass: 1 while every token's prepared x of the chunk stays in L1
// across rows; otherwise up to kMaxRows rows walk the blocks together, so
// one block's x (n * 320 bytes) is reused from L1 by all of them.
constexpr int64_t kL1Budget = 20 * 1024, kMaxRows = 32;

// x of one block, arranged like the transposed weights.
struct alignas(32) Q8TBlock {
  int8_t x[8]
          [32];  // byte 16h + 4k + c: q < 4 x[2k + h, 8q + 2c]; q >= 4 x[2k + h, 8(q-4) + 2c + 1]
  int32_t corr[8];   // 12 sum(x[g]), lane 4h + k for group g = 2k + h
  float half_xs[8];  // 0.5 xs[g] (0.5 undoes the doubled weights), same lanes
};

// Groups [g0, g0 + ng) of one token into (ng + 7) / 8 blocks; missing groups
// of the last block are zero (they contribute 0 whatever the weight bytes).
void prepare(const int8_t* xq, const float* xs, int64_t g0, int64_t ng, Q8TBlock* out) {
  for (int64_t b = 0; 8 * b < ng; ++b) {
    Q8TBlock& o = out[b];
    for (int h = 0; h < 2; ++h)
      for (int k = 0; k < 4; ++k) {
        const int64_t g = 8 * b + 2 * k + h;  // relative to g0
        int32_t sum = 0;
        for (int q = 0; q < 4; ++q)
          for (int c = 0; c < 4; ++c) {
            const int64_t col = 32 * (g0 + g) + 8 * q + 2 * c;
            const int8_t e = g < ng ? xq[col] : 0, d = g < ng ? xq[col + 1] : 0;
            o.x[q][16 * h + 4 * k + c] = e;
            o.x[4 + q][16 * h + 4 * k + c] = d;
            sum += e + d;
          }
        o.corr[4 * h + k] = 12 * sum;
        o.half_xs[4 * h + k] = g < ng ? 0.5f * xs[g0 + g] : 0.0f;
      }
  }
}

// One row's block decoded: u = w2 + 12 of transposed vector q, even (q < 4)
// and odd (q >= 4) columns.
struct TBlock {
  __m256i u[8];
};

[[gnu::always_inline]] inline TBlock decode(const uint8_t* p) {
  const __m256i lut = _mm256_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0,
                                       12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0);
  const __m256i nibble = _mm256_set1_epi8(0x0f);
  __m256i v[4];
  for (int k = 0; k < 4; ++k)
    v[k] = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p + 32 * k));
  const __m256i a = _mm256_unpacklo_epi32(v[0], v[1]), b = _mm256_unpackhi_epi32(v[0], v[1]);
  const __m256i c = _mm256_unpacklo_epi32(v[2], v[3]), d = _mm256_unpackhi_epi32(v[2], v[3]);
  v[0] = _mm256_unpacklo_epi64(a, c);
  v[1] = _mm256_unpackhi_epi64(a, c);
  v[2] = _mm256_unpacklo_epi64(b, d);
  v[3] = _mm256_unpackhi_epi64(b, d);
  TBlock t;
  for (int q = 0; q < 4; ++q) {
    t.u[q] = _mm256_shuffle_epi8(lut, _mm256_and_si256(v[q], nibble));
    t.u[4 + q] = _mm256_shuffle_epi8(lut, _mm256_and_si256(_mm256_srli_epi16(v[q], 4), nibble));
  }
  return t;
}

// acc += the block's contribution for one token (the matvec's q8_block).
[[gnu::always_inline]] inline __m256 token_block(const TBlock& w, __m256 t, const Q8TBlock& x,
                                                 __m256 acc) {
  const __m256i ones = _mm256_set1_epi16(1);
  __m256i lo =
      _mm256_maddubs_epi16(w.u[0], _mm256_load_si256(reinterpret_cast<const __m256i*>(x.x[0])));
  __m256i hi =
      _mm256_maddubs_epi16(w.u[4], _mm256_load_si256(reinterpret_cast<const __m256i*>(x.x[4])));
  for (int q = 1; q < 4; ++q) {
    lo = _mm256_add_epi16(
        lo,
        _mm256_maddubs_epi16(w.u[q], _mm256_load_si256(reinterpret_cast<const __m256i*>(x.x[q]))));
    hi = _mm256_add_epi16(
        hi, _mm256_maddubs_epi16(w.u[4 + q],
                                 _mm256_load_si256(reinterpret_cast<const __m256i*>(x.x[4 + q]))));
  }
  const __m256i sums = _mm256_add_epi32(_mm256_madd_epi16(lo, ones), _mm256_madd_epi16(hi, ones));
  const __m256i d =
      _mm256_sub_epi32(sums, _mm256_load_si256(reinterpret_cast<const __m256i*>(x.corr)));
  return _mm256_fmadd_ps(_mm256_cvtepi32_ps(d), _mm256_mul_ps(t, _mm256_load_ps(x.half_xs)), acc);
}

// Rows [r, r + rows) (packed bytes p0, exponents s0, row strides rb and
// groups) over groups [0, ng) of the chunk, n tokens: each row's sum into
// part[rr * n + t]. acc: rows * n * 16 floats (acc0 and acc1 per row and
// token). ahead_rows: the prefetch distance in rows.
void rows_pass(const uint8_t* p0, int64_t rb, const uint8_t* s0, int64_t row_groups, int64_t rows,
               const Q8TBlock* xb, int64_t x_stride, int64_t n, int64_t ng, int64_t ahead_rows,
               float* acc, float* part) {
  std::memset(acc, 0, static_cast<size_t>(rows * n) * 16 * sizeof(float));
  const int64_t blocks = ng / 8;
  for (int64_t b = 0; b < blocks; ++b)
    for (int64_t rr = 0; rr < rows; ++rr) {
      const uint8_t* q = p0 + rr * rb + 128 * b;
      const uint8_t* s = s0 + rr * row_groups + 8 * b;
      const char* ahead = reinterpret_cast<const char*>(q + ahead_rows * rb);
      _mm_prefetch(ahead, _MM_HINT_T1);
      _mm_prefetch(ahead + 64, _MM_HINT_T1);
      _mm_prefetch(reinterpret_cast<const char*>(s + ahead_rows * row_groups), _MM_HINT_T1);
      const TBlock w = decode(q);
      const __m256 t = block_scales(s);
      float* a = acc + rr * n * 16 + (b & 1) * 8;
      const Q8TBlock* x = xb + b;
      for (int64_t tok = 0; tok < n; ++tok, x += x_stride, a += 16)
        _mm256_store_ps(a, token_block(w, t, *x, _mm256_load_ps(a)));
    }
  const int64_t left = ng - 8 * blocks;
  if (left > 0)  // a last partial block: never read past the row (into acc1)
    for (int64_t rr = 0; rr < rows; ++rr) {
      alignas(32) uint8_t pk[128];
      uint8_t sc[8];
      const uint8_t* q = p0 + rr * rb + 128 * blocks;
      const uint8_t* s = s0 + rr * row_groups + 8 * blocks;
      for (int i = 0; i < 128; ++i) pk[i] = i < 16 * left ? q[i] : 0;
      for (int i = 0; i < 8; ++i) sc[i] = i < left ? s[i] : 127;  // x is 0 there
      const TBlock w = decode(pk);
      const __m256 t = block_scales(sc);
      float* a = acc + rr * n * 16 + 8;
      const Q8TBlock* x = xb + blocks;
      for (int64_t tok = 0; tok < n; ++tok, x += x_stride, a += 16)
        _mm256_store_ps(a, token_block(w, t, *x, _mm256_load_ps(a)));
    }
  for (int64_t rr = 0; rr < rows; ++rr)
    for (int64_t tok = 0; tok < n; ++tok) {
      const float* a = acc + (rr * n + tok) * 16;
      part[rr * n + tok] = hsum(_mm256_add_ps(_mm256_load_ps(a), _mm256_load_ps(a + 8)));
    }
}

// One tile of at most kTokenTile tokens (see there).
void q8_tile(const Mxfp4Matrix& w, const int8_t* Xq, int64_t ldxq, const float* Xs, int64_t ldxs,
             int64_t n, float* Y, int64_t ldy, int64_t r0, int64_t r1) {
  const int64_t groups = w.cols / 32;
  if (mxfp4_matmul_trivial(w, n, Y, ldy, r0, r1)) return;
  const int64_t chunk_groups = 8 * kChunkBlocks;
  const int64_t max_blocks = ((groups < chunk_groups ? groups : chunk_groups) + 7) / 8;
  const int64_t x_bytes = n * max_blocks * static_cast<int64_t>(sizeof(Q8TBlock));
  int64_t pass_rows = 1;
  if (x_bytes > kL1Budget) {
    pass_rows = (kL1Budget - n * static_cast<int64_t>(sizeof(Q8TBlock))) / (n * 64);
    pass_rows = pass_rows < 1 ? 1 : pass_rows > kMaxRows ? kMaxRows : pass_rows;
  }
  const size_t abytes = static_cast<size_t>(pass_rows * n) * 16 * sizeof(float);
  const size_t pbytes = static_cast<size_t>(pass_rows * n) * sizeof(float);
  auto* base = static_cast<uint8_t*>(t_scratch.get(static_cast<size_t>(x_bytes) + abytes + pbytes));
  auto* xb = reinterpret_cast<Q8TBlock*>(base);
  auto* acc = reinterpret_cast<float*>(base + x_bytes);
  auto* part = reinterpret_cast<float*>(base + x_bytes + abytes);
  const int64_t rb = w.cols / 2;
  for (int64_t g0 = 0; g0 < groups; g0 += chunk_groups) {
    const int64_t ng = groups - g0 < chunk_groups ? groups - g0 : chunk_groups;
    for (int64_t t = 0; t < n; ++t)
      prepare(Xq + t * ldxq, Xs + t * ldxs, g0, ng, xb + t * max_blocks);
    for (int64_t r = r0; r < r1;) {
      const int64_t rows = r1 - r < pass_rows ? r1 - r : pass_rows;
      // Whole passes ahead, at least kPrefetchBytes (a prefetch past the
      // matrix's end does not fault).
      const int64_t ahead = rows * ((kPrefetchBytes + rows * rb - 1) / (rows * rb));
      rows_pass(w.packed + r * rb + 16 * g0, rb, w.scales + r * groups + g0, groups, rows, xb,
                max_blocks, n, ng, ahead, acc, part);
      // Token by token: Y's rows of two tokens are ldy floats apart (often
      // the same L1 set), a token's rows contiguous.
      for (int64_t t = 0; t < n; ++t)
        for (int64_t rr = 0; rr < rows; ++rr) {
          float& y = Y[t * ldy + r + rr];
          y = g0 == 0 ? part[rr * n + t] : y + part[rr * n + t];
        }
      r += rows;
    }
  }
}

// Tokens per tile: a tile's prepared x of one block stays in L1 while the
// rows of a pass reuse it; beyond that it spills to L2 for every pass. On
// Zen 5 (one thread, 3072 x 3584, K3_KERNELS=avx2): 16 tokens per call ran
// at 104 G multiply-adds/s, 64 at 75, 256 at 55.
constexpr int64_t kTokenTile = 16;

}  // namespace

void mxfp4_matmul_q8_avx2_batched(const Mxfp4Matrix& w, const int8_t* Xq, int64_t ldxq,
                                  const float* Xs, int64_t ldxs, int64_t n, float* Y, int64_t ldy,
                                  int64_t r0, int64_t r1) {
  // Every (row, token) is computed the same way in any tile: the same bits.
  if (mxfp4_matmul_trivial(w, n, Y, ldy, r0, r1)) return;
  for (int64_t t0 = 0; t0 < n; t0 += kTokenTile) {
    const int64_t nt = n - t0 < kTokenTile ? n - t0 : kTokenTile;
    q8_tile(w, Xq + t0 * ldxq, ldxq, Xs + t0 * ldxs, ldxs, nt, Y + t0 * ldy, ldy, r0, r1);
  }
}

}  // namespace k3::kernels
