// Row conversion of stored dense weights (BF16, F16) to f32.
// Kernels: a scalar reference (always built) and an AVX2/F16C variant; the
// dispatching entry points pick the variant once (shared/base/cpu_features.h;
// the AVX-512 level uses the AVX2 conversions: they are not on a hot path).
#pragma once

#include <cstddef>
#include <cstdint>

namespace k3::kernels {

// IEEE half / bfloat16 -> f32 for one value (the reference definitions).
// (Out of line on purpose: an inline function used by an AVX2 translation unit
// could be emitted with AVX2 instructions and picked by the linker for every
// caller. AVX2 files therefore call no inline or template code of shared headers.)
float f16_to_f32_ref(uint16_t h);
float bf16_to_f32_ref(uint16_t b);
// f32 -> bf16, round to nearest even (NaN stays NaN). Used by the writers.
uint16_t f32_to_bf16(float f);
// f32 -> IEEE half, round to nearest even, overflow to inf.
uint16_t f32_to_f16(float f);

void bf16_to_f32_scalar(const uint16_t* src, float* dst, size_t n);
void f16_to_f32_scalar(const uint16_t* src, float* dst, size_t n);
void bf16_to_f32_avx2(const uint16_t* src, float* dst, size_t n);
void f16_to_f32_avx2(const uint16_t* src, float* dst, size_t n);

// Dispatching versions.
void bf16_to_f32(const uint16_t* src, float* dst, size_t n);
void f16_to_f32(const uint16_t* src, float* dst, size_t n);

}  // namespace k3::kernels
