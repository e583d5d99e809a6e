// File-local helpers of the two AVX2 MXFP4 kernel files (mxfp4_avx2.cpp and
// mxfp4_q8_batched_avx2.cpp), included by those two only. Everything is in an
// unnamed namespace: each AVX2 translation unit gets its own copy, so the
// linker never merges one into code built without those flags.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "shared/kernels/avx2_hsum.h"

namespace k3::kernels {
namespace {

// The 8 group scales of a block (8 exponent bytes) in block order: the
// kUe8m0Scale table, computed: 2^(s-127) has the float bits s << 23, except
// s = 0 (subnormal 2^-127: 0x00400000) and s = 255 (NaN: 0x7fc00000).
[[gnu::always_inline]] inline __m256 block_scales(const uint8_t* s) {
  uint64_t e8;
  __builtin_memcpy(&e8, s, 8);
  const __m128i order = _mm_setr_epi8(0, 2, 4, 6, 1, 3, 5, 7, -1, -1, -1, -1, -1, -1, -1, -1);
  const __m256i e =
      _mm256_cvtepu8_epi32(_mm_shuffle_epi8(_mm_cvtsi64_si128(static_cast<int64_t>(e8)), order));
  __m256i bits = _mm256_slli_epi32(e, 23);
  // Any byte 0 or 255? (the exact zero-byte test of e8 and ~e8, on the integer
  // side; "Bit Twiddling Hacks", determine if a word has a zero byte)
  const uint64_t ones = 0x0101010101010101u, highs = 0x8080808080808080u;
  if ((((e8 - ones) & ~e8) | ((~e8 - ones) & e8)) & highs) {
    const __m256i special = _mm256_or_si256(_mm256_cmpeq_epi32(e, _mm256_setzero_si256()),
                                            _mm256_cmpeq_epi32(e, _mm256_set1_epi32(255)));
    bits = _mm256_or_si256(bits, _mm256_and_si256(special, _mm256_set1_epi32(0x00400000)));
  }
  return _mm256_castsi256_ps(bits);
}

}  // namespace
}  // namespace k3::kernels
