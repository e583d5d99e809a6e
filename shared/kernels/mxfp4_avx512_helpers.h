// File-local helpers of the two AVX-512 MXFP4 kernel files (mxfp4_avx512.cpp
// and mxfp4_q8_batched_avx512.cpp), included by those two only. Everything is
// in an unnamed namespace: each AVX-512 translation unit gets its own copy,
// so the linker never merges one into code built without those flags.
#pragma once

#include <immintrin.h>

#include <cstdint>
#include <cstdlib>

#include "shared/kernels/kernel_scratch.h"

namespace k3::kernels {
namespace {

// Columns handled per x-preparation pass: every MXFP4 matrix of the model
// (<= 14336 columns) in one pass, so each row streams once.
constexpr int64_t kChunkBlocks = 32;  // 16384 columns
// How far ahead of the loads the rows are prefetched, into L2 (_MM_HINT_T1).
// Measured on Zen 4 in alternating runs, matrices out of cache: with 2
// threads, 4 KiB into L2 streamed the q8 matvec at 29-35 GB/s where 2 KiB
// into L1 gave 25-33; with 1 thread, 8 KiB gave 23.0-25.5 GB/s (about the
// one-thread read probe's 27) where 4 KiB gave 18.6-19.6 and 16 KiB 24.4-24.9.
constexpr int64_t kPrefetchBytes = 8192;

// Byte mask of the bytes [64 j, 64 j + 64) that lie below `bytes`.
[[gnu::always_inline]] inline __mmask64 load_mask(int64_t bytes, int j) {
  const int64_t n = bytes - 64 * j;
  return n >= 64 ? ~__mmask64{0} : n <= 0 ? __mmask64{0} : (__mmask64{1} << n) - 1;
}

// 2^(e-127) from exponent lanes e (int32): the float bits e << 23, except
// e = 0 (subnormal 2^-127: 0x00400000) and e = 255 (NaN: 0x7fc00000).
[[gnu::always_inline]] inline __m512 ue8m0_to_f32(__m512i e) {
  const __mmask16 special = _mm512_cmpeq_epi32_mask(e, _mm512_setzero_si512()) |
                            _mm512_cmpeq_epi32_mask(e, _mm512_set1_epi32(255));
  const __m512i bits = _mm512_slli_epi32(e, 23);
  return _mm512_castsi512_ps(
      _mm512_mask_or_epi32(bits, special, bits, _mm512_set1_epi32(0x00400000)));
}

// The 16 group exponents of a block (`groups` <= 16 of them present; the others
// read as 0), as int32 lanes in the order `order`.
[[gnu::always_inline]] inline __m512i block_exponents(const uint8_t* s, int64_t groups,
                                                      __m128i order) {
  const __m128i e = groups >= 16
                        ? _mm_loadu_si128(reinterpret_cast<const __m128i*>(s))
                        : _mm_maskz_loadu_epi8(static_cast<__mmask16>((1u << groups) - 1), s);
  return _mm512_cvtepu8_epi32(_mm_shuffle_epi8(e, order));
}

}  // namespace
}  // namespace k3::kernels
