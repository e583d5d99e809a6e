// Dense weight matrices held in RAM, quantized at load (K3_MODEL.md: dense
// weights are BF16 in the checkpoint; the engine keeps them as):
//   32: f32;
//   8:  int8 per row: scale = max|row| / 127, q = round-to-nearest(w / scale);
//   4:  int4 per 64-column group: scale = max|group| / 7, q in [-7, 7] stored as
//       the nibble q + 8, LOW nibble = even column; a row is padded with zeros to
//       a whole number of groups.
// Dot-product kernels: scalar reference (always built) + AVX2
// (kernels/dense_avx2.cpp) + AVX-512 (kernels/dense_avx512.cpp), picked once at
// start-up (shared/base/cpu_features.h). matmul() computes every (row, token)
// with the same arithmetic as matvec() (the SIMD batched forms give each
// result the bits of the single dot of the same ISA), so batching never
// changes a result bit. Results differ across ISAs only in the order of the
// f32 additions (within 1e-5 * sum|terms|, tests/shared/kernels/kernel_test_support.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace k3::kernels {

// Row dot products. n = number of columns.
float dot_f32_scalar(const float* w, const float* x, int64_t n);
float dot_q8_scalar(const int8_t* w, float scale, const float* x, int64_t n);
float dot_q4g64_scalar(const uint8_t* w, const float* scales, const float* x, int64_t n);
float dot_f32_avx2(const float* w, const float* x, int64_t n);
float dot_q8_avx2(const int8_t* w, float scale, const float* x, int64_t n);
float dot_q4g64_avx2(const uint8_t* w, const float* scales, const float* x, int64_t n);

// AVX2 batched forms; every result has exactly the bits of the single dot
// above (same per-result arithmetic), which keeps matvec() == matmul().
//
// int4: x is first permuted (and scaled by 2^-24, exact) into the order the
// AVX2 decoder produces; xp holds (n + 63) / 64 * 64 floats, zero past n.
// dot_q4g64_avx2 does this internally, in chunks.
void prepare_x_q4g64_avx2(const float* x, int64_t n, float* xp);
float dot_q4g64_prepared_avx2(const uint8_t* w, const float* scales, const float* xp, int64_t n);
// One row with T tokens (token t at X + t * ldx; int4: prepared, at XP + t *
// ldxp), the weights decoded once for up to 3 tokens: out[t * out_stride].
void dots_f32_avx2(const float* w, const float* X, int64_t ldx, int64_t T, int64_t n, float* out,
                   int64_t out_stride);
void dots_q8_avx2(const int8_t* w, float scale, const float* X, int64_t ldx, int64_t T, int64_t n,
                  float* out, int64_t out_stride);
void dots_q4g64_prepared_avx2(const uint8_t* w, const float* scales, const float* XP, int64_t ldxp,
                              int64_t T, int64_t n, float* out, int64_t out_stride);
// y[r] for rows [r0, r1) of a row-major matrix (ldw elements per row; int4:
// whole groups per row, scales (n + 63) / 64 per row); f32 and int8 go two
// rows at a time sharing the loads of x.
void gemv_f32_avx2(const float* w, int64_t ldw, const float* x, int64_t n, float* y, int64_t r0,
                   int64_t r1);
void gemv_q8_avx2(const int8_t* w, int64_t ldw, const float* scales, const float* x, int64_t n,
                  float* y, int64_t r0, int64_t r1);
void gemv_q4g64_prepared_avx2(const uint8_t* w, const float* scales, const float* xp, int64_t n,
                              float* y, int64_t r0, int64_t r1);

// AVX-512 forms of all of the above, same contracts, except the prepared int4
// x: its own order, (n + 127) / 128 * 128 floats (whole pairs of groups), zero
// past n. dots_* decode the weights once for up to 4 tokens.
float dot_f32_avx512(const float* w, const float* x, int64_t n);
float dot_q8_avx512(const int8_t* w, float scale, const float* x, int64_t n);
float dot_q4g64_avx512(const uint8_t* w, const float* scales, const float* x, int64_t n);
void prepare_x_q4g64_avx512(const float* x, int64_t n, float* xp);
float dot_q4g64_prepared_avx512(const uint8_t* w, const float* scales, const float* xp, int64_t n);
void dots_f32_avx512(const float* w, const float* X, int64_t ldx, int64_t T, int64_t n, float* out,
                     int64_t out_stride);
void dots_q8_avx512(const int8_t* w, float scale, const float* X, int64_t ldx, int64_t T, int64_t n,
                    float* out, int64_t out_stride);
void dots_q4g64_prepared_avx512(const uint8_t* w, const float* scales, const float* XP,
                                int64_t ldxp, int64_t T, int64_t n, float* out, int64_t out_stride);
void gemv_f32_avx512(const float* w, int64_t ldw, const float* x, int64_t n, float* y, int64_t r0,
                     int64_t r1);
void gemv_q8_avx512(const int8_t* w, int64_t ldw, const float* scales, const float* x, int64_t n,
                    float* y, int64_t r0, int64_t r1);
void gemv_q4g64_prepared_avx512(const uint8_t* w, const float* scales, const float* xp, int64_t n,
                                float* y, int64_t r0, int64_t r1);

// Tiled GEMM for many tokens (shared/kernels/dense_gemm_avx512.cpp):
// Y[t * ldy + r] = W[r, :] . X[t * ldx + :] for t < T, r in [r0, r1) of a
// row-major matrix (ldw elements per row; int8: one scale per row; int4:
// whole groups per row, (n + 63) / 64 scales per row, the tokens prepared by
// prepare_x_q4g64_avx512, ldxp floats apart). Blocked for registers, L1 and
// L2 (weights decoded once per row block, activations kept in L1 per column
// block); every result has exactly the bits of the AVX-512 single dot
// (dot_f32_avx512, dot_q8_avx512, dot_q4g64_prepared_avx512). Opens no
// OpenMP region; keeps a per-thread scratch (the decoded row block, at most
// 512 KiB, and the accumulators).
void gemm_f32_avx512(const float* w, int64_t ldw, const float* X, int64_t ldx, int64_t T, int64_t n,
                     float* Y, int64_t ldy, int64_t r0, int64_t r1);
void gemm_q8_avx512(const int8_t* w, int64_t ldw, const float* scales, const float* X, int64_t ldx,
                    int64_t T, int64_t n, float* Y, int64_t ldy, int64_t r0, int64_t r1);
void gemm_q4g64_prepared_avx512(const uint8_t* w, const float* scales, const float* XP,
                                int64_t ldxp, int64_t T, int64_t n, float* Y, int64_t ldy,
                                int64_t r0, int64_t r1);

// Quantizers (one row): used by DenseMatrix::set_rows and by tests.
void quantize_row_q8(const float* src, int64_t n, int8_t* q, float* scale);
// q has (n + 63) / 64 * 32 bytes, scales (n + 63) / 64 floats.
void quantize_row_q4g64(const float* src, int64_t n, uint8_t* q, float* scales);

// Not thread-safe to mutate; const methods are thread-safe.
//
// Arrays (the layouts a repacked container stores, shared/checkpoint/
// container.h): int8 data [rows * cols] + scales [rows]; int4 data
// [rows * groups * 32] + scales [rows * groups], groups = (cols + 63) / 64;
// f32 data [rows * cols] (no scales). A matrix owns them (quantized at load
// by set_rows, or adopted from a container) or views them where someone else
// keeps them (a read-only mapping): the same kernels run either way, so the
// results have the same bits.
class DenseMatrix {
 public:
  DenseMatrix() = default;
  // bits: 32, 8 or 4.
  DenseMatrix(int bits, int64_t rows, int64_t cols);
  // Takes prepared arrays (sizes as above; checked by the caller).
  static DenseMatrix adopt(int bits, int64_t rows, int64_t cols, std::vector<uint8_t> data,
                           std::vector<float> scales);
  // Uses arrays it does not own: they must outlive the matrix and every copy
  // of it. `scales` 4-byte aligned, and `data` too for f32.
  static DenseMatrix view(int bits, int64_t rows, int64_t cols, const uint8_t* data,
                          const float* scales);

  // Converts rows [r0, r0 + n) from f32 (`src` holds n * cols values). Owned
  // matrices only.
  void set_rows(int64_t r0, int64_t n, const float* src);

  int bits() const { return bits_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  // Bytes of data and scales (whether owned or viewed).
  size_t bytes() const { return bytes_for(bits_, rows_, cols_); }
  // What a matrix of that size takes at those bits (32, 8 or 4).
  static size_t bytes_for(int bits, int64_t rows, int64_t cols);
  bool is_view() const { return view_data_ != nullptr; }

  // y[r] = W[r, :] . x for r in [r0, r1).
  void matvec(const float* x, float* y, int64_t r0, int64_t r1) const;
  // Y[t * ldy + r] = W[r, :] . X[t * ldx + :] for t < T, r in [r0, r1).
  void matmul(const float* X, int64_t ldx, int64_t T, float* Y, int64_t ldy, int64_t r0,
              int64_t r1) const;
  // The row as the kernels see it (dequantized).
  void row_f32(int64_t r, float* out) const;

 private:
  float dot(int64_t r, const float* x) const;
  const uint8_t* raw() const { return view_data_ != nullptr ? view_data_ : data_.data(); }
  const int8_t* q8() const { return reinterpret_cast<const int8_t*>(raw()); }
  const uint8_t* q4() const { return raw(); }
  const float* f32() const { return reinterpret_cast<const float*>(raw()); }
  const float* sc() const { return view_data_ != nullptr ? view_scales_ : scales_.data(); }

  int bits_ = 32;
  int64_t rows_ = 0, cols_ = 0;
  int64_t groups_ = 0;                  // int4: groups per row
  std::vector<uint8_t> data_;           // owned arrays (f32 stored as its bytes)
  std::vector<float> scales_;           // int8: one per row; int4: groups_ per row
  const uint8_t* view_data_ = nullptr;  // viewed arrays, when not owned
  const float* view_scales_ = nullptr;
};

}  // namespace k3::kernels
