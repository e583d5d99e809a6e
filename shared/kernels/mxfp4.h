// Kernels on routed-expert weights stored as MXFP4 (K3_MODEL.md, "MXFP4"),
// computed on the stored bytes (never re-encoded).
//
// Layout of one matrix W [rows, cols] (cols a multiple of 32):
//   packed [rows, cols/2]: two e2m1 codes per byte, the LOW nibble is the even
//     column; code bit 3 = sign, bits 0-2 index {0, .5, 1, 1.5, 2, 3, 4, 6};
//   scales [rows, cols/32]: ue8m0 exponent s per 32 columns, w = v * 2^(s-127).
// Scale 255 (NaN in OCP MX) yields NaN in every kernel variant; scale 0 is 2^-127.
//
// Two kernels, each with a scalar reference (always built), an AVX2 variant
// (kernels/mxfp4_avx2.cpp) and an AVX-512 VNNI variant (kernels/mxfp4_avx512.cpp),
// chosen once at start-up (shared/base/cpu_features.h, K3_KERNELS):
//   - float: y = W x with x in f32 (exact up to f32 summation order);
//   - int8-activation ("q8"): x quantized per 32-column group to int8 with one
//     f32 scale per group (quantize_q8_32); the doubled e2m1 values
//     {0,1,2,3,4,6,8,12} are exact int8, so each group is an integer dot
//     product with one float multiply: y += (2^(s-127) / 2) * xs_g * idot_g.
// Kernels compute rows [r0, r1) and open no OpenMP region: callers split rows.
//
// Accuracy contract of the SIMD variants (the same for AVX2 and AVX-512): the
// per-group products are exact (q8: the integer group dot is exact; f32: each
// product w * x is one correctly rounded f32 product), only the order of the
// f32 additions differs from the scalar reference, so every variant is within
// 1e-5 * sum|terms| of the exact result (tests/shared/kernels/kernel_test_support.h);
// results are NOT bit-identical across ISAs. Within one ISA they are
// deterministic, and the batched forms below reproduce the per-row bits.
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
void mxfp4_matvec_f32_avx512(const Mxfp4Matrix& w, const float* x, float* y, int64_t r0,
                             int64_t r1);
void mxfp4_matvec_q8_avx512(const Mxfp4Matrix& w, const int8_t* xq, const float* xs, float* y,
                            int64_t r0, int64_t r1);

// Batched forms ("GEMM" for one expert's tokens): n token rows against rows
// [r0, r1) of W, each weight block read and decoded once for several tokens.
//   q8:  token t's activations are Xq + t * ldxq (cols int8, as quantize_q8_32
//        writes them) with group scales Xs + t * ldxs (cols / 32 floats);
//   f32: token t's activations are X + t * ldx (cols floats);
//   output: Y[t * ldy + r] for t in [0, n), r in [r0, r1); nothing else of Y
//        is written (ldy >= r1 lets threads split rows of one Y).
// Strides are in elements; n <= 0 writes nothing. Bit-identity guarantee: for
// every ISA, Y[t * ldy + r] has exactly the bits the same ISA's matvec gives
// row r for token t (memcmp-equal to calling matvec n times), so batching
// never changes a result. Like matvec, a call opens no OpenMP region, reads
// only the given rows and tokens, and may run concurrently with other calls
// on other threads (the SIMD variants keep a per-thread scratch buffer for the
// prepared activations, kept for the thread's lifetime: about n * c * 1.25
// bytes for q8 (AVX-512: plus at most 36 KiB of float accumulators) and
// n * c * 4 for f32, c = min(cols, 16384) rounded up to 512).
// Inputs must not alias Y. Rows [r0, r1) must lie in [0, w.rows).
void mxfp4_matmul_q8_scalar(const Mxfp4Matrix& w, const int8_t* Xq, int64_t ldxq, const float* Xs,
                            int64_t ldxs, int64_t n, float* Y, int64_t ldy, int64_t r0, int64_t r1);
void mxfp4_matmul_f32_scalar(const Mxfp4Matrix& w, const float* X, int64_t ldx, int64_t n, float* Y,
                             int64_t ldy, int64_t r0, int64_t r1);
void mxfp4_matmul_q8_avx2(const Mxfp4Matrix& w, const int8_t* Xq, int64_t ldxq, const float* Xs,
                          int64_t ldxs, int64_t n, float* Y, int64_t ldy, int64_t r0, int64_t r1);
void mxfp4_matmul_f32_avx2(const Mxfp4Matrix& w, const float* X, int64_t ldx, int64_t n, float* Y,
                           int64_t ldy, int64_t r0, int64_t r1);
void mxfp4_matmul_q8_avx512(const Mxfp4Matrix& w, const int8_t* Xq, int64_t ldxq, const float* Xs,
                            int64_t ldxs, int64_t n, float* Y, int64_t ldy, int64_t r0, int64_t r1);
void mxfp4_matmul_f32_avx512(const Mxfp4Matrix& w, const float* X, int64_t ldx, int64_t n, float* Y,
                             int64_t ldy, int64_t r0, int64_t r1);

// The AVX-512 q8 matmul of n >= 2 decodes nibbles with one vpermb when
// the CPU has AVX-512 VBMI (Ice Lake, Zen 4 and later), else with vpshufb
// (e.g. Cascade Lake); both decodes give the same bytes, so the same results.
// This entry point always takes the vpshufb decode, so tests can compare the
// two on a CPU with VBMI.
void mxfp4_matmul_q8_avx512_novbmi(const Mxfp4Matrix& w, const int8_t* Xq, int64_t ldxq,
                                   const float* Xs, int64_t ldxs, int64_t n, float* Y, int64_t ldy,
                                   int64_t r0, int64_t r1);

// The AVX-512 weight-stationary q8 kernel behind mxfp4_matmul_q8_avx512 for
// n >= 2 (shared/kernels/mxfp4_q8_batched_avx512.cpp; any n >= 1 works and
// gives the matvec's bits); allow_vbmi false forces the vpshufb decode.
void mxfp4_matmul_q8_avx512_batched(const Mxfp4Matrix& w, const int8_t* Xq, int64_t ldxq,
                                    const float* Xs, int64_t ldxs, int64_t n, float* Y, int64_t ldy,
                                    int64_t r0, int64_t r1, bool allow_vbmi);

// The AVX2 weight-stationary q8 kernel behind mxfp4_matmul_q8_avx2 for n >= 2
// (shared/kernels/mxfp4_q8_batched_avx2.cpp; any n >= 1 works and gives the
// AVX2 matvec's bits).
void mxfp4_matmul_q8_avx2_batched(const Mxfp4Matrix& w, const int8_t* Xq, int64_t ldxq,
                                  const float* Xs, int64_t ldxs, int64_t n, float* Y, int64_t ldy,
                                  int64_t r0, int64_t r1);

// The trivial calls every matmul driver answers first: n <= 0 writes nothing;
// a matrix without columns writes 0 to rows [r0, r1) of every token. True
// when the call is done. (Not inline: the SIMD files call it, see
// kernels/mxfp4_avx512.cpp.)
bool mxfp4_matmul_trivial(const Mxfp4Matrix& w, int64_t n, float* Y, int64_t ldy, int64_t r0,
                          int64_t r1);

// Dispatching entry points (the variant of kernel_isa()).
void mxfp4_matvec_f32(const Mxfp4Matrix& w, const float* x, float* y, int64_t r0, int64_t r1);
void mxfp4_matvec_q8(const Mxfp4Matrix& w, const int8_t* xq, const float* xs, float* y, int64_t r0,
                     int64_t r1);
void mxfp4_matmul_q8(const Mxfp4Matrix& w, const int8_t* Xq, int64_t ldxq, const float* Xs,
                     int64_t ldxs, int64_t n, float* Y, int64_t ldy, int64_t r0, int64_t r1);
void mxfp4_matmul_f32(const Mxfp4Matrix& w, const float* X, int64_t ldx, int64_t n, float* Y,
                      int64_t ldy, int64_t r0, int64_t r1);

}  // namespace k3::kernels
