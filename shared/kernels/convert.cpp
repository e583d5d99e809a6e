#include "shared/kernels/convert.h"

#include <cmath>
#include <cstring>

#include "shared/base/cpu_features.h"

namespace k3::kernels {

float f16_to_f32_ref(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  const uint32_t man = h & 0x3ffu;
  uint32_t bits;
  if (exp == 0) {
    if (man == 0) {
      bits = sign;
    } else {  // subnormal: man * 2^-24
      float f = std::ldexp(static_cast<float>(man), -24);
      std::memcpy(&bits, &f, 4);
      bits |= sign;
    }
  } else if (exp == 31) {
    bits = sign | 0x7f800000u | (man << 13);
  } else {
    bits = sign | ((exp + 112) << 23) | (man << 13);
  }
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

float bf16_to_f32_ref(uint16_t b) {
  uint32_t u = static_cast<uint32_t>(b) << 16;
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

uint16_t f32_to_bf16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  if ((u & 0x7fffffffu) > 0x7f800000u)
    return static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
  const uint32_t rounding = 0x7fffu + ((u >> 16) & 1u);
  return static_cast<uint16_t>((u + rounding) >> 16);
}

uint16_t f32_to_f16(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  const uint16_t sign = static_cast<uint16_t>((u >> 16) & 0x8000u);
  const uint32_t abs = u & 0x7fffffffu;
  if (abs > 0x7f800000u) return sign | 0x7e00u;   // NaN
  if (abs >= 0x477ff000u) return sign | 0x7c00u;  // rounds to >= 65536: inf
  if (abs < 0x33000000u) return sign;             // below half the smallest subnormal
  int32_t exp = static_cast<int32_t>(abs >> 23) - 127;
  uint32_t man = (abs & 0x7fffffu) | 0x800000u;
  // Number of low mantissa bits to drop: 13 for normals, more for subnormals.
  const int shift = exp < -14 ? 13 + (-14 - exp) : 13;
  const uint32_t half = 1u << (shift - 1);
  const uint32_t rem = man & ((1u << shift) - 1);
  uint32_t r = man >> shift;
  if (rem > half || (rem == half && (r & 1u))) ++r;
  if (exp < -14) return sign | static_cast<uint16_t>(r);  // subnormal (may round up to normal)
  // Normal: r holds the implicit bit at 2^10; a carry to 2^11 bumps the exponent.
  uint32_t e = static_cast<uint32_t>(exp + 15);
  if (r & 0x800u) {
    r >>= 1;
    ++e;
  }
  if (e >= 31) return sign | 0x7c00u;
  return sign | static_cast<uint16_t>((e << 10) | (r & 0x3ffu));
}

void bf16_to_f32_scalar(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = bf16_to_f32_ref(src[i]);
}

void f16_to_f32_scalar(const uint16_t* src, float* dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = f16_to_f32_ref(src[i]);
}

void bf16_to_f32(const uint16_t* src, float* dst, size_t n) {
#ifdef K3_HAVE_AVX2_KERNELS
  if (base::kernel_isa() != base::KernelIsa::kScalar) return bf16_to_f32_avx2(src, dst, n);
#endif
  bf16_to_f32_scalar(src, dst, n);
}

void f16_to_f32(const uint16_t* src, float* dst, size_t n) {
#ifdef K3_HAVE_AVX2_KERNELS
  if (base::kernel_isa() != base::KernelIsa::kScalar) return f16_to_f32_avx2(src, dst, n);
#endif
  f16_to_f32_scalar(src, dst, n);
}

}  // namespace k3::kernels
