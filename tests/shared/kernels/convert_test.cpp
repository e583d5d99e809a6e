#include "shared/kernels/convert.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "shared/base/cpu_features.h"

#ifndef K3_HAVE_AVX2_KERNELS
// No AVX2 variants in this build: cpu_supports_avx2() is false and the
// comparison skips before calling them; these only satisfy the linker.
namespace k3::kernels {
void bf16_to_f32_avx2(const uint16_t*, float*, size_t) {
  std::abort();
}
void f16_to_f32_avx2(const uint16_t*, float*, size_t) {
  std::abort();
}
}  // namespace k3::kernels
#endif

namespace k3::kernels {
namespace {

uint32_t bits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// Double-precision definition of an IEEE half, independent of the bit tricks.
double f16_value(uint16_t h) {
  const int sign = (h >> 15) ? -1 : 1;
  const int exp = (h >> 10) & 31, man = h & 1023;
  if (exp == 0) return sign * std::ldexp(man, -24);
  if (exp == 31) return man ? NAN : sign * INFINITY;
  return sign * std::ldexp(1024 + man, exp - 25);
}

TEST(Convert, F16ReferenceMatchesDefinitionForAllValues) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const double want = f16_value(static_cast<uint16_t>(h));
    const float got = f16_to_f32_ref(static_cast<uint16_t>(h));
    if (std::isnan(want))
      EXPECT_TRUE(std::isnan(got)) << h;
    else
      EXPECT_EQ(static_cast<double>(got), want) << h;
  }
}

// Over all 65536 inputs, at odd lengths and offsets (tails of the SIMD loop).
TEST(Convert, Avx2MatchesScalarBitForBit) {
  if (!base::cpu_supports_avx2()) GTEST_SKIP() << "CPU lacks AVX2/FMA/F16C";
  std::vector<uint16_t> in(65536 + 7);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<uint16_t>(i * 40503u);
  for (size_t len : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{65536 + 7}}) {
    for (size_t off : {size_t{0}, size_t{3}}) {
      if (off + len > in.size()) continue;
      std::vector<float> a(len), b(len), c(len), d(len);
      bf16_to_f32_scalar(in.data() + off, a.data(), len);
      bf16_to_f32_avx2(in.data() + off, b.data(), len);
      f16_to_f32_scalar(in.data() + off, c.data(), len);
      f16_to_f32_avx2(in.data() + off, d.data(), len);
      for (size_t i = 0; i < len; ++i) {
        EXPECT_EQ(bits(a[i]), bits(b[i])) << "bf16 " << in[off + i];
        // F16C quiets signalling NaNs; compare NaN-ness for those.
        if (std::isnan(c[i]))
          EXPECT_TRUE(std::isnan(d[i]));
        else
          EXPECT_EQ(bits(c[i]), bits(d[i])) << "f16 " << in[off + i];
      }
    }
  }
}

TEST(Convert, F32ToF16RoundTripsEveryHalf) {
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = f16_to_f32_ref(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    EXPECT_EQ(f32_to_f16(f), h) << h;
  }
}

TEST(Convert, F32ToF16RoundsToNearestEven) {
  // Halfway between 1 and the next half (1 + 2^-10): ties to even (1.0).
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11)), 0x3c00);
  // Just above halfway rounds up.
  EXPECT_EQ(f32_to_f16(1.0f + std::ldexp(1.0f, -11) + std::ldexp(1.0f, -20)), 0x3c01);
  EXPECT_EQ(f32_to_f16(65520.0f), 0x7c00);  // rounds past the largest half: inf
  EXPECT_EQ(f32_to_f16(65504.0f), 0x7bff);
  EXPECT_EQ(f32_to_f16(std::ldexp(1.0f, -25)), 0x0000);  // tie at half the smallest subnormal
  EXPECT_EQ(f32_to_f16(std::ldexp(1.5f, -25)), 0x0001);
}

TEST(Convert, F32ToBf16RoundsToNearestEven) {
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3f80);
  EXPECT_EQ(f32_to_bf16(bf16_to_f32_ref(0x3f81)), 0x3f81);
  // 1 + 2^-8 is the tie between 0x3f80 and 0x3f81: even wins.
  EXPECT_EQ(f32_to_bf16(1.0f + std::ldexp(1.0f, -8)), 0x3f80);
  EXPECT_EQ(f32_to_bf16(1.0f + 3 * std::ldexp(1.0f, -8)), 0x3f82);
  EXPECT_TRUE(std::isnan(bf16_to_f32_ref(f32_to_bf16(NAN))));
}

}  // namespace
}  // namespace k3::kernels
