// Kernels on routed-expert weights stored as MXFP4 (K3_MODEL.md, "MXFP4"),
// computed on the stored bytes (never re-encoded).
//
// Layout of one matrix W [rows, cols] (cols a multiple of 32):
//   packed [rows, cols/2]: two e2m1 codes per byte, the LOW nibble is the even
//     column; code bit 3 = sign, bits 0-2 index {0, .5, 1, 1.5, 2, 3, 4, 6};
//   scales [rows, cols/32]: ue8m0 exponent s per 32 columns, w = v * 2^(s-127).
// Scale 255 (NaN in OCP MX) yields NaN in every kernel variant; scale 0 is 2^-127.
//
// Two kernels, each with a scalar reference (always built) and an AVX2 variant
// (kernels/mxfp4_avx2.cpp), chosen once at start-up (shared/base/cpu_features.h):
//   - float: y = W x with x in f32 (exact up to f32 summation order);
//   - int8-activation ("q8"): x quantized per 32-column group to int8 with one
//     f32 scale per group (quantize_q8_32); the doubled e2m1 values
//     {0,1,2,3,4,6,8,12} are exact int8, so each group is an integer dot
//     product with one float multiply: y += (2^(s-127) / 2) * xs_g * idot_g.
// Kernels compute rows [r0, r1) and open no OpenMP region: callers split rows.
#pragma once

#include <cstddef>
#include <cstdint>

namespace k3::kernels {

struct Mxfp4Matrix {
  const uint8_t* packed = nullptr;  // [rows, cols/2]
  const uint8_t* scales = nullptr;  // [rows, cols/32]
  int64_t rows = 0;
  int64_t cols = 0;  // multiple of 32
};

// e2m1 code -> value (sign included), and the doubled values as int8.
extern const float kE2m1Values[16];
extern const int8_t kE2m1Doubled[16];
// ue8m0 exponent -> 2^(s-127) (index 255 is NaN, index 0 the subnormal 2^-127).
struct Ue8m0Table {
  float v[256];
};
extern const Ue8m0Table kUe8m0Scale;

// Quantizes x[n] (n a multiple of 32) per 32-element group: scale = max|x|/127,
// q = round-to-nearest-even(x / scale) (0 for an all-zero group, scale 0).
void quantize_q8_32(const float* x, int64_t n, int8_t* q, float* scales);

void mxfp4_matvec_f32_scalar(const Mxfp4Matrix& w, const float* x, float* y, int64_t r0,
                             int64_t r1);
void mxfp4_matvec_q8_scalar(const Mxfp4Matrix& w, const int8_t* xq, const float* xs, float* y,
                            int64_t r0, int64_t r1);
void mxfp4_matvec_f32_avx2(const Mxfp4Matrix& w, const float* x, float* y, int64_t r0, int64_t r1);
void mxfp4_matvec_q8_avx2(const Mxfp4Matrix& w, const int8_t* xq, const float* xs, float* y,
                          int64_t r0, int64_t r1);

// Dispatching entry points.
void mxfp4_matvec_f32(const Mxfp4Matrix& w, const float* x, float* y, int64_t r0, int64_t r1);
void mxfp4_matvec_q8(const Mxfp4Matrix& w, const int8_t* xq, const float* xs, float* y, int64_t r0,
                     int64_t r1);

}  // namespace k3::kernels
