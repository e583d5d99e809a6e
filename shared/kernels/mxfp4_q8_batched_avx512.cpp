// The batched AVX-512 VNNI int8-activation MXFP4 kernel (shared/kernels/mxfp4.h,
// mxfp4_matmul_q8_avx512 for n >= 2 token rows; one token row takes the
// matvec kernel of mxfp4_avx512.cpp, which this reproduces bit for bit). Like
// every *_avx512.cpp file, compiled with the AVX-512 flags and calling no
// inline or template code from shared headers, only intrinsics, plain C++ and
// its own file-local helpers.
//
// A 512-bit load takes 64 packed bytes: 4 groups of 32 columns of one row,
// group k in 128-bit lane k; a block is 16 groups (512 columns, 256 packed
// bytes per row, 4 loads); each block is software-prefetched into L2 at least
// kPrefetchBytes (whole passes of rows) ahead.
#include <immintrin.h>

#include <cstdlib>
#include <type_traits>

#include "shared/kernels/mxfp4.h"
#include "shared/kernels/mxfp4_avx512_helpers.h"

namespace k3::kernels {
namespace {

// ---------------------------------------------------------------------------
// int8-activation kernel, with VNNI. vpdpbusd multiplies UNSIGNED bytes by
// SIGNED bytes: the doubled e2m1 weight w2 in {-12..12} is looked up with a +12
// offset (u = w2 + 12 in 0..24) as the unsigned operand, the activations are
// the signed one: sum(u x) = sum(w2 x) + 12 sum(x), and 12 sum(x) per group is
// subtracted through the accumulator's start value (`init`).
//
// Lane layout (no per-token reduction): a block's 4 loads are transposed as
// 4x4 dwords inside each 128-bit lane, so that int32 lane m = 4k + j of every
// transposed vector holds 4 packed bytes of ONE group, 4j + k (load j, lane k);
// transposed vector q holds bytes 4q .. 4q+3 of each group (columns 8q .. 8q+7,
// low nibbles even, high nibbles odd). The 8 vpdpbusd of a block (4 vectors x
// {low, high} nibbles) then all accumulate into one int32 vector whose lane m
// is the exact dot of group 4j + k: the 32 products of a group never leave
// their lane. The transposition and decoding are per weight block, shared by
// every token of the call; each (row, token) costs the 8 vpdpbusd and one fma
// per block (the vpdpbusd/fma pipes are the limit: 9 cycles per 512 weights
// and token on the machines measured).
//
// Exact integer -> float: the accumulator starts at 0x4b400000 - 12 sum(x)
// (the float 1.5 * 2^23, whose ulp is 1), so it ends as the bits of the float
// 1.5 * 2^23 + dot (|dot| <= 32 * 12 * 128 < 2^22); subtracting 1.5 * 2^23
// gives exactly float(dot), as a conversion would, on the adder pipes.
//
// Scale: the float accumulation is acc = fma(float(dot), 2^(s-127) * 0.5 xs,
// acc) per group lane and block, the 16 lanes summed at the end. 2^(s-127) *
// 0.5 xs is an exact multiply by a power of two when both the exponent s and
// 0.5 xs are far from the float range's ends: then it is computed as an
// integer add of (s - 127) << 23 to the bits of 0.5 xs (the same bits). A
// block with an exponent outside [kSafeExpLo, kSafeExpHi], a partial block, or
// a call with a token whose 0.5 xs (full blocks) is zero, subnormal, not
// finite or outside that range, multiplies instead. Either way each result is
// the same float, so which path a (row, token) takes never changes its bits.

// Float operations whose operand order is fixed (inline asm): when two
// operands are NaN, x86 returns the first source's NaN, so a compiler free to
// commute operands could give the same (row, token) NaNs of different signs in
// different inlined copies. Fixed order keeps even those bits the same, and
// the same as this file's matvec gave before the batched kernel (GCC 12).
// acc + d * f, NaN priority acc, d, f.
[[gnu::always_inline]] inline __m512 fmadd_fixed(__m512 d, __m512 f, __m512 acc) {
  asm("vfmadd231ps %[f], %[d], %[acc]" : [acc] "+v"(acc) : [d] "v"(d), [f] "v"(f));
  return acc;
}
// a * b, NaN priority a.
[[gnu::always_inline]] inline __m512 mul_fixed(__m512 a, __m512 b) {
  __m512 r;
  asm("vmulps %[b], %[a], %[r]" : [r] "=v"(r) : [a] "v"(a), [b] "v"(b));
  return r;
}
// a + b, NaN priority a.
[[gnu::always_inline]] inline float add_fixed(float a, float b) {
  float r;
  asm("vaddss %[b], %[a], %[r]" : [r] "=v"(r) : [a] "v"(a), [b] "v"(b));
  return r;
}
// The sum of the 16 lanes in _mm512_reduce_add_ps's order, first operands as
// GCC 12 emitted them for the matvec before: upper 256 bits + lower, upper 128
// + lower, lanes {2, 3, 0, 1} + {0, 1, 2, 3}, lane 0 + lane 1.
[[gnu::always_inline]] inline float reduce_add_fixed(__m512 v) {
  const __m256 hi8 = _mm512_extractf32x8_ps(v, 1), lo8 = _mm512_castps512_ps256(v);
  __m256 s8;
  asm("vaddps %[b], %[a], %[r]" : [r] "=v"(s8) : [a] "v"(hi8), [b] "v"(lo8));
  const __m128 hi4 = _mm256_extractf128_ps(s8, 1), lo4 = _mm256_castps256_ps128(s8);
  __m128 s4;
  asm("vaddps %[b], %[a], %[r]" : [r] "=v"(s4) : [a] "v"(hi4), [b] "v"(lo4));
  const __m128 sw = _mm_shuffle_ps(s4, s4, 0x4e);  // lanes {2, 3, 0, 1}
  __m128 s2;
  asm("vaddps %[b], %[a], %[r]" : [r] "=v"(s2) : [a] "v"(sw), [b] "v"(s4));
  const __m128 l1 = _mm_movehdup_ps(s2);  // lane 1 in lane 0
  __m128 s1;
  asm("vaddss %[b], %[a], %[r]" : [r] "=v"(s1) : [a] "v"(s2), [b] "v"(l1));
  return _mm_cvtss_f32(s1);
}

struct alignas(64) Q8XBlock {
  int8_t x[8][64];      // q < 4: lane m = 4k + j: x[group 4j + k, 8q + 0, 2, 4, 6];
                        // q >= 4: the odd columns 8(q - 4) + 1, 3, 5, 7
  int32_t init[16];     // 0x4b400000 - 12 sum(x[g]), lane m
  int32_t half_xs[16];  // bits of 0.5 xs[g] (0.5 undoes the doubled weights) minus
                        // 127 << 23 (the exponent bias), lane m
};

constexpr int32_t kMagicBits = 0x4b400000;  // the float 1.5 * 2^23
constexpr float kMagic = 12582912.0f;
// Exponent ranges (biased) for which 2^(s-127) * h is exact as an exponent add:
// s and h's exponent both in [64, 190] put the product's in [1, 253].
constexpr int32_t kSafeExpLo = 64, kSafeExpHi = 190;

// Reduced-order position -> byte of the block's 16 exponents.
[[gnu::always_inline]] inline __m128i reduced_order() {
  return _mm_setr_epi8(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
}

// Prepares groups [g0, g0 + ng) of one token into (ng + 15) / 16 blocks;
// missing groups of the last block are zero (they contribute 0 whatever the
// weight bytes). Returns whether every 0.5 xs of the full blocks has its
// exponent in the safe range (the exponent-add path may be used).
//
// Per block and q, two qword gathers take bytes 8q .. 8q + 7 of every group
// (lane m = 4k + j: group 4j + k; the lanes of groups past ng are masked, so
// never read), a byte shuffle splits each qword into its even and odd
// columns, and two dword permutations put the even ones in x[q], the odd in
// x[4 + q]. The group sums are vpdpbusd of those bytes with ones (exact).
bool prepare_q8(const int8_t* xq, const float* xs, int64_t g0, int64_t ng, Q8XBlock* out) {
  // Byte offsets of group g(m) in the block, lanes 0-7 and 8-15.
  const __m256i at_lo = _mm256_setr_epi32(0, 128, 256, 384, 32, 160, 288, 416);
  const __m256i at_hi = _mm256_setr_epi32(64, 192, 320, 448, 96, 224, 352, 480);
  const __m512i group_of_lane =
      _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  const __m512i split =
      _mm512_broadcast_i32x4(_mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, 8, 10, 12, 14, 9, 11, 13, 15));
  const __m512i even = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i odd = _mm512_add_epi32(even, _mm512_set1_epi32(1));
  const __m512i ones = _mm512_set1_epi8(1);
  bool safe = true;
  for (int64_t b = 0; 16 * b < ng; ++b) {
    Q8XBlock& o = out[b];
    const int64_t left = ng - 16 * b;
    const __mmask16 present =
        left >= 16
            ? __mmask16{0xffff}
            : _mm512_cmplt_epi32_mask(group_of_lane, _mm512_set1_epi32(static_cast<int32_t>(left)));
    const int8_t* base = xq + 32 * (g0 + 16 * b);
    __m512i sum = _mm512_setzero_si512();
    for (int q = 0; q < 4; ++q) {
      const __m256i col = _mm256_set1_epi32(8 * q);
      const __m512i lo = _mm512_shuffle_epi8(
          _mm512_mask_i32gather_epi64(_mm512_setzero_si512(), static_cast<__mmask8>(present),
                                      _mm256_add_epi32(at_lo, col), base, 1),
          split);
      const __m512i hi = _mm512_shuffle_epi8(
          _mm512_mask_i32gather_epi64(_mm512_setzero_si512(), static_cast<__mmask8>(present >> 8),
                                      _mm256_add_epi32(at_hi, col), base, 1),
          split);
      const __m512i e = _mm512_permutex2var_epi32(lo, even, hi);
      const __m512i d = _mm512_permutex2var_epi32(lo, odd, hi);
      _mm512_store_si512(o.x[q], e);
      _mm512_store_si512(o.x[4 + q], d);
      sum = _mm512_dpbusd_epi32(_mm512_dpbusd_epi32(sum, ones, e), ones, d);
    }
    const __m512i twelve = _mm512_add_epi32(_mm512_slli_epi32(sum, 3), _mm512_slli_epi32(sum, 2));
    _mm512_store_si512(o.init, _mm512_sub_epi32(_mm512_set1_epi32(kMagicBits), twelve));
    const __mmask16 loaded =
        left >= 16 ? __mmask16{0xffff} : static_cast<__mmask16>((1u << left) - 1);
    const __m512 scale =
        _mm512_permutexvar_ps(group_of_lane, _mm512_maskz_loadu_ps(loaded, xs + g0 + 16 * b));
    const __m512i h = _mm512_castps_si512(_mm512_mul_ps(_mm512_set1_ps(0.5f), scale));
    _mm512_store_si512(o.half_xs, _mm512_sub_epi32(h, _mm512_set1_epi32(127 << 23)));
    if (left >= 16) {
      const __m512i e = _mm512_srli_epi32(h, 23);  // sign 1 -> > 255
      safe = safe && _mm512_cmple_epu32_mask(_mm512_sub_epi32(e, _mm512_set1_epi32(kSafeExpLo)),
                                             _mm512_set1_epi32(kSafeExpHi - kSafeExpLo)) == 0xffff;
    }
  }
  return safe;
}

// 4x4 transposition of dwords inside each 128-bit lane of v[0..3].
[[gnu::always_inline]] inline void transpose4(__m512i v[4]) {
  const __m512i a = _mm512_unpacklo_epi32(v[0], v[1]), b = _mm512_unpackhi_epi32(v[0], v[1]);
  const __m512i c = _mm512_unpacklo_epi32(v[2], v[3]), d = _mm512_unpackhi_epi32(v[2], v[3]);
  v[0] = _mm512_unpacklo_epi64(a, c);
  v[1] = _mm512_unpackhi_epi64(a, c);
  v[2] = _mm512_unpacklo_epi64(b, d);
  v[3] = _mm512_unpackhi_epi64(b, d);
}

// vpermb (AVX-512 VBMI): byte i = table[idx[i] & 63]. Inline asm, so that
// only code paths taken on a CPU with VBMI contain it (this file is compiled
// without -mavx512vbmi; the driver checks the CPU).
[[gnu::always_inline]] inline __m512i permute_bytes_vbmi(__m512i idx, __m512i table) {
  __m512i r;
  asm("vpermb %[t], %[i], %[r]" : [r] "=v"(r) : [i] "v"(idx), [t] "v"(table));
  return r;
}

// Decodes block b of one row (packed bytes q of the block, exponents sb,
// `groups` <= 16 of them present) into u[q] (q < 4 the low nibbles, even
// columns, of transposed vector q; q >= 4 the high nibbles of vector q - 4,
// as u = w2 + 12) and the 16 exponents e (int32 lanes in the reduced order).
// Returns whether all 16
// exponents lie in the safe range (as bytes: s - 64 <= 126 unsigned; a partial
// block's missing ones read 0, so it never is).
template <bool V>
[[gnu::always_inline]] inline bool decode_block(const uint8_t* q, const uint8_t* sb, int64_t groups,
                                                __m512i u[8], __m512i& e) {
  const __m512i lut = _mm512_broadcast_i32x4(
      _mm_setr_epi8(12, 13, 14, 15, 16, 18, 20, 24, 12, 11, 10, 9, 8, 6, 4, 0));
  const __m512i nibble = _mm512_set1_epi8(0x0f);
  __m512i raw[4];
  for (int j = 0; j < 4; ++j)
    // A last partial block reads only the row's bytes (masked loads do not
    // fault); the zero bytes meet zero x.
    raw[j] = groups == 16 ? _mm512_loadu_si512(q + 64 * j)
                          : _mm512_maskz_loadu_epi8(load_mask(16 * groups, j), q + 64 * j);
  transpose4(raw);
  for (int j = 0; j < 4; ++j) {
    const __m512i hi = _mm512_srli_epi16(raw[j], 4);
    if (V) {
      u[j] = permute_bytes_vbmi(raw[j], lut);
      u[4 + j] = permute_bytes_vbmi(hi, lut);
    } else {
      u[j] = _mm512_shuffle_epi8(lut, _mm512_and_si512(raw[j], nibble));
      u[4 + j] = _mm512_shuffle_epi8(lut, _mm512_and_si512(hi, nibble));
    }
  }
  const __m128i s16 = groups == 16
                          ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(sb))
                          : _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << groups) - 1), sb);
  e = _mm512_cvtepu8_epi32(_mm_shuffle_epi8(s16, reduced_order()));
  return _mm_cmple_epu8_mask(_mm_sub_epi8(s16, _mm_set1_epi8(kSafeExpLo)),
                             _mm_set1_epi8(kSafeExpHi - kSafeExpLo)) == 0xffff;
}

// `sets` sets of R (1 or 2) consecutive rows (set k's rows start at packed
// bytes p0 + k R row_bytes, exponents s0 + k R row_groups), groups [0, ng),
// times n tokens (token t's prepared x at xb + t * x_stride). Weight-
// stationary: block b of a set's R rows is loaded, transposed and decoded
// once into 8 R registers, then every token streams past it (8 loads of x shared by the R rows, 8 R
// vpdpbusd); the sets walk the blocks together, so one block's x is reused
// from L1 by all of them. The float accumulators live in
// acc0[((k n + t) R + r) * 16] between blocks. Writes out[(k R + r) n + t].
// fast_x: prepare_q8 returned true for every token. V: the CPU has VBMI
// (vpermb decodes a nibble in one instruction instead of two).
template <int R, bool V, bool kOne = false>
void q8_rows(const uint8_t* p0, int64_t row_bytes, const uint8_t* s0, int64_t row_groups,
             int64_t sets, const Q8XBlock* xb, int64_t x_stride, int64_t n, int64_t ng, bool fast_x,
             int64_t ahead_rows, float* acc0, float* out) {
  const __m512 magic = _mm512_set1_ps(kMagic);
  // kOne (one token, one set, both known at compile time): the accumulators
  // stay in registers (the same fma sequence, without the round trip through
  // memory on its chain) and the loops over sets and tokens vanish.
  __m512 areg[R];
  for (int r = 0; r < R; ++r) areg[r] = _mm512_setzero_ps();
  for (int64_t b = 0; 16 * b < ng; ++b)
    for (int64_t set = 0; set < (kOne ? 1 : sets); ++set) {
      const uint8_t* p = p0 + set * R * row_bytes;
      const uint8_t* s = s0 + set * R * row_groups;
      float* acc = acc0 + set * n * R * 16;
      const int64_t groups = ng - 16 * b < 16 ? ng - 16 * b : 16;
      __m512i u[R][8], e[R];
      bool fast = fast_x && groups == 16;
      for (int r = 0; r < R; ++r) {
        const uint8_t* q = p + r * row_bytes + 256 * b;
        // The same block of the row ahead_rows later, into L2 (see
        // q8_driver); a prefetch past the matrix's end does not fault.
        const char* ahead = reinterpret_cast<const char*>(q + ahead_rows * row_bytes);
        for (int l = 0; l < 256; l += 64) _mm_prefetch(ahead + l, _MM_HINT_T1);
        _mm_prefetch(reinterpret_cast<const char*>(s + (r + ahead_rows) * row_groups + 16 * b),
                     _MM_HINT_T1);
        fast = decode_block<V>(q, s + r * row_groups + 16 * b, groups, u[r], e[r]) && fast;
      }
      // fast: the exponent bits to add to 0.5 xs's; otherwise 2^(s-127).
      __m512i scale[R];
      for (int r = 0; r < R; ++r)
        scale[r] = fast ? _mm512_slli_epi32(e[r], 23) : _mm512_castps_si512(ue8m0_to_f32(e[r]));
      const Q8XBlock* x = xb + b;
      for (int64_t t = 0; t < (kOne ? 1 : n); ++t, x += x_stride) {
        // Two dependency chains per row (low and high nibbles), added at the
        // end: integer sums, exact in any order.
        __m512i dot[R], dot2[R];
        const __m512i init = _mm512_load_si512(x->init);
        for (int r = 0; r < R; ++r) {
          dot[r] = init;
          dot2[r] = _mm512_setzero_si512();
        }
        for (int q = 0; q < 4; ++q) {
          __m512i xv = _mm512_load_si512(x->x[q]);
          if (R > 1) asm("" : "+v"(xv));  // one load for all R rows (not a memory operand each)
          for (int r = 0; r < R; ++r) dot[r] = _mm512_dpbusd_epi32(dot[r], u[r][q], xv);
          __m512i xw = _mm512_load_si512(x->x[4 + q]);
          if (R > 1) asm("" : "+v"(xw));
          for (int r = 0; r < R; ++r) dot2[r] = _mm512_dpbusd_epi32(dot2[r], u[r][4 + q], xw);
        }
        for (int r = 0; r < R; ++r) dot[r] = _mm512_add_epi32(dot[r], dot2[r]);
        const __m512i h = _mm512_load_si512(x->half_xs);
        for (int r = 0; r < R; ++r) {
          float* a = acc + (t * R + r) * 16;
          const __m512 d = _mm512_sub_ps(_mm512_castsi512_ps(dot[r]), magic);
          const __m512 f =
              fast ? _mm512_castsi512_ps(_mm512_add_epi32(h, scale[r]))
                   : mul_fixed(
                         _mm512_castsi512_ps(scale[r]),
                         _mm512_castsi512_ps(_mm512_add_epi32(h, _mm512_set1_epi32(127 << 23))));
          if constexpr (kOne) {
            areg[r] = fmadd_fixed(d, f, areg[r]);
          } else {
            const __m512 prev = b == 0 ? _mm512_setzero_ps() : _mm512_load_ps(a);
            _mm512_store_ps(a, fmadd_fixed(d, f, prev));
          }
        }
      }
    }
  if constexpr (kOne) {
    for (int r = 0; r < R; ++r) out[r] = reduce_add_fixed(areg[r]);
    return;
  }
  for (int64_t set = 0; set < sets; ++set)
    for (int r = 0; r < R; ++r)
      for (int64_t t = 0; t < n; ++t)
        out[(set * R + r) * n + t] =
            reduce_add_fixed(_mm512_load_ps(acc0 + ((set * n + t) * R + r) * 16));
}

// Tokens per tile: a tile's prepared x of one block (kTokenTile * 640 bytes)
// stays in L1 while a whole pass of row pairs reuses it, and the tile's float
// accumulators with it; beyond that the x of a block spills to L2 for every
// pair. On Zen 5 (one thread, 3072 x 3584): 16 tokens per tile ran at
// 203-236 G multiply-adds/s, 24 at 128-151, 256 at 97-100.
constexpr int64_t kTokenTile = 16;

// Row pairs per pass: kL1Budget bounds one block's x of a tile plus the
// pairs' float accumulators (Zen 5's L1 holds 48 KiB; 40 KiB ran 5-8 % faster
// than 20 at n = 32 and 256, both expert shapes, 2 threads), at most
// kMaxPairs pairs.
constexpr int64_t kL1Budget = 40 * 1024, kMaxPairs = 16;

bool cpu_has_vbmi() {
  static const bool has = (__builtin_cpu_init(), __builtin_cpu_supports("avx512vbmi"));
  return has;
}

// Per chunk of columns: every token's x prepared once (vectorised, for the
// whole call); then the tiles of kTokenTile tokens, each passing over the
// rows in pairs. Every (row, token) is computed the same way in any tile or
// pass, so the bits do not depend on them.
void q8_driver(const Mxfp4Matrix& w, const int8_t* Xq, int64_t ldxq, const float* Xs, int64_t ldxs,
               int64_t n, float* Y, int64_t ldy, int64_t r0, int64_t r1, bool allow_vbmi) {
  const int64_t groups = w.cols / 32;
  if (mxfp4_matmul_trivial(w, n, Y, ldy, r0, r1)) return;
  const int64_t chunk_groups = 16 * kChunkBlocks;
  const int64_t max_blocks = ((groups < chunk_groups ? groups : chunk_groups) + 15) / 16;
  const int64_t tile = n < kTokenTile ? n : kTokenTile;
  const int64_t tiles = (n + tile - 1) / tile;
  // Row pairs per pass: 1 while a tile's prepared x of the chunk stays in L1
  // across pairs; otherwise up to kMaxPairs pairs walk the blocks together,
  // so one block's x (tile * 640 bytes) is reused from L1 by all of them.
  const int64_t block_x = tile * static_cast<int64_t>(sizeof(Q8XBlock));
  int64_t pairs = 1;
  if (tile * max_blocks * static_cast<int64_t>(sizeof(Q8XBlock)) > kL1Budget) {
    pairs = (kL1Budget - block_x) / (tile * 128);
    pairs = pairs < 1 ? 1 : pairs > kMaxPairs ? kMaxPairs : pairs;
  }
  // Scratch: every token's prepared x, the float accumulators (2 pairs rows x
  // tile tokens x 16 lanes), the results of a pass (2 pairs x tile floats),
  // and each tile's fast flag.
  const size_t xbytes = static_cast<size_t>(n * max_blocks) * sizeof(Q8XBlock);
  const size_t abytes = static_cast<size_t>(pairs * tile) * 2 * 64;
  const size_t pbytes = static_cast<size_t>(pairs * tile) * 2 * sizeof(float);
  const size_t fbytes = (static_cast<size_t>(tiles) + 63) / 64 * 64;
  auto* base = static_cast<uint8_t*>(t_scratch.get(xbytes + abytes + pbytes + fbytes));
  auto* xb = reinterpret_cast<Q8XBlock*>(base);
  auto* acc = reinterpret_cast<float*>(base + xbytes);
  auto* part = reinterpret_cast<float*>(base + xbytes + abytes);
  auto* fast = base + xbytes + abytes + pbytes;
  const bool vbmi = allow_vbmi && cpu_has_vbmi();
  const int64_t rb = w.cols / 2;
  for (int64_t g0 = 0; g0 < groups; g0 += chunk_groups) {
    const int64_t ng = groups - g0 < chunk_groups ? groups - g0 : chunk_groups;
    for (int64_t k = 0; k < tiles; ++k) {
      bool f = true;
      for (int64_t t = k * tile; t < n && t < (k + 1) * tile; ++t)
        f = prepare_q8(Xq + t * ldxq, Xs + t * ldxs, g0, ng, xb + t * max_blocks) && f;
      fast[k] = f ? 1 : 0;
    }
    for (int64_t k = 0; k < tiles; ++k) {
      const int64_t t0 = k * tile, nt = n - t0 < tile ? n - t0 : tile;
      const Q8XBlock* xt = xb + t0 * max_blocks;
      for (int64_t r = r0; r < r1;) {
        const int64_t left = r1 - r;
        // One token: one row at a time, the matrix read as one sequential
        // stream (two interleaved row streams reach less of the memory
        // bandwidth, and a lone token has nothing to amortise a decode over).
        const int64_t sets = left >= 2 * pairs ? pairs : left >= 2 ? left / 2 : 1;
        const int64_t rows = left >= 2 && nt > 1 ? 2 * sets : 1;
        const uint8_t* p = w.packed + r * rb + 16 * g0;
        const uint8_t* s = w.scales + r * groups + g0;
        // Prefetch distance: whole passes (a pass walks
        // `rows` rows block by block), at least kPrefetchBytes. A fixed
        // distance along one row would land inside the pass itself once
        // several rows walk together (up to 32 rows of a few KiB): then no
        // byte of the next pass was on its way when the pass reached it.
        // Measured on Zen 4 (2 threads, matrices out of cache), n = 8 went
        // from 3.0-3.7 to 1.9-2.5 ns per block and token.
        const int64_t ahead = rows * ((kPrefetchBytes + rows * rb - 1) / (rows * rb));
        if (rows >= 2)
          (vbmi ? q8_rows<2, true> : q8_rows<2, false>)(p, rb, s, groups, sets, xt, max_blocks, nt,
                                                        ng, fast[k] != 0, ahead, acc, part);
        else if (nt == 1)
          (vbmi ? q8_rows<1, true, true> : q8_rows<1, false, true>)(p, rb, s, groups, 1, xt,
                                                                    max_blocks, 1, ng, fast[k] != 0,
                                                                    ahead, acc, part);
        else
          (vbmi ? q8_rows<1, true> : q8_rows<1, false>)(p, rb, s, groups, 1, xt, max_blocks, nt, ng,
                                                        fast[k] != 0, ahead, acc, part);
        // Token by token: a token's row of Y is contiguous, while the rows
        // of two tokens are ldy floats apart (12 KiB for 3072 rows: the
        // same L1 set, so walking the tokens within a row missed on every
        // store; 11 % of the call's time at n = 256).
        for (int64_t t = 0; t < nt; ++t)
          for (int64_t rr = 0; rr < rows; ++rr) {
            float& y = Y[(t0 + t) * ldy + r + rr];
            y = g0 == 0 ? part[rr * nt + t] : add_fixed(y, part[rr * nt + t]);
          }
        r += rows;
      }
    }
  }
}

}  // namespace

void mxfp4_matmul_q8_avx512_batched(const Mxfp4Matrix& w, const int8_t* Xq, int64_t ldxq,
                                    const float* Xs, int64_t ldxs, int64_t n, float* Y, int64_t ldy,
                                    int64_t r0, int64_t r1, bool allow_vbmi) {
  q8_driver(w, Xq, ldxq, Xs, ldxs, n, Y, ldy, r0, r1, allow_vbmi);
}

}  // namespace k3::kernels
