// Dense kernels of shared/kernels/dense.h (f32, int8 per row, int4 group-64):
// every SIMD variant this machine supports (AVX2, AVX-512) against the scalar
// reference, and all against a double-precision loop, over odd shapes; the
// batched forms of each SIMD level against its single dot, bit for bit.
// Tolerances: kernel_test_support.h.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "shared/base/cpu_features.h"
#include "shared/kernels/dense.h"
#include "shared/kernels/mxfp4.h"
#include "tests/shared/kernels/kernel_test_support.h"

namespace k3::kernels {
namespace {

using testing::dense_simd_variants;
using testing::DenseVariant;
using testing::expect_close;
using testing::GuardedBuffer;
using testing::kRel;
using testing::random_floats;
using testing::Reference;

// ---------------------------------------------------------------------------
// Dense dots.

const int64_t kDenseCols[] = {1, 7, 15, 16, 17, 63, 64, 65, 127, 128, 129, 200, 4097, 5000, 7168};

double int4_value(const uint8_t* q, int64_t i) {
  const uint8_t b = q[i / 2];
  return ((i & 1) ? (b >> 4) : (b & 15)) - 8;
}

TEST(DenseKernel, QuantizersWithinHalfAStep) {
  std::mt19937 rng(9);
  for (int64_t n : kDenseCols) {
    const std::vector<float> w = random_floats(n, rng, -3.0f, 3.0f);
    std::vector<int8_t> q8(n);
    float s8 = 0;
    quantize_row_q8(w.data(), n, q8.data(), &s8);
    const int64_t groups = (n + 63) / 64;
    std::vector<uint8_t> q4(groups * 32, 0x11);
    std::vector<float> s4(groups);
    quantize_row_q4g64(w.data(), n, q4.data(), s4.data());
    for (int64_t i = 0; i < n; ++i) {
      EXPECT_LE(std::fabs(w[i] - q8[i] * static_cast<double>(s8)), s8 * 0.5000001) << n << " " << i;
      const double d4 = int4_value(q4.data(), i) * static_cast<double>(s4[i / 64]);
      EXPECT_LE(std::fabs(w[i] - d4), s4[i / 64] * 0.5000001) << n << " " << i;
      EXPECT_GE(int4_value(q4.data(), i), -7);
      EXPECT_LE(int4_value(q4.data(), i), 7);
    }
    // Padding to a whole group holds q = 0 (nibble 8).
    for (int64_t i = n; i < groups * 64; ++i)
      EXPECT_EQ(int4_value(q4.data(), i), 0) << n << " " << i;
  }
  // An all-zero row: scale 0, q 0.
  std::vector<float> z(65, 0.0f);
  std::vector<int8_t> q8(65, 5);
  float s8 = -1;
  quantize_row_q8(z.data(), 65, q8.data(), &s8);
  EXPECT_EQ(s8, 0.0f);
  for (int8_t v : q8) EXPECT_EQ(v, 0);
  std::vector<uint8_t> q4(64);
  std::vector<float> s4(2, -1);
  quantize_row_q4g64(z.data(), 65, q4.data(), s4.data());
  EXPECT_EQ(s4[0], 0.0f);
  EXPECT_EQ(s4[1], 0.0f);
  for (uint8_t b : q4) EXPECT_EQ(b, 0x88);
}

// One quantized row with guarded buffers (nothing past the row is readable).
struct DenseRow {
  int64_t n;
  GuardedBuffer x, wf, w8, w4, s4;
  float s8 = 0;
  DenseRow(int64_t cols, std::mt19937& rng)
      : n(cols),
        x(cols * 4),
        wf(cols * 4),
        w8(cols),
        w4((cols + 63) / 64 * 32),
        s4((cols + 63) / 64 * 4) {
    const std::vector<float> w = random_floats(n, rng), xv = random_floats(n, rng);
    std::memcpy(wf.as<float>(), w.data(), n * 4);
    std::memcpy(x.as<float>(), xv.data(), n * 4);
    quantize_row_q8(w.data(), n, w8.as<int8_t>(), &s8);
    quantize_row_q4g64(w.data(), n, w4.as<uint8_t>(), s4.as<float>());
  }
  Reference ref(int bits) {
    Reference r;
    for (int64_t i = 0; i < n; ++i) {
      const double w = bits == 32  ? wf.as<float>()[i]
                       : bits == 8 ? w8.as<int8_t>()[i] * static_cast<double>(s8)
                                   : int4_value(w4.as<uint8_t>(), i) * s4.as<float>()[i / 64];
      const double term = w * x.as<float>()[i];
      r.value += term;
      r.sumabs += std::fabs(term);
    }
    return r;
  }
};

TEST(DenseKernel, ScalarMatchesDoubleLoop) {
  std::mt19937 rng(10);
  for (int64_t n : kDenseCols) {
    DenseRow row(n, rng);
    const float* x = row.x.as<float>();
    const std::string at = "n " + std::to_string(n);
    expect_close(dot_f32_scalar(row.wf.as<float>(), x, n), row.ref(32), kRel, "f32 " + at);
    expect_close(dot_q8_scalar(row.w8.as<int8_t>(), row.s8, x, n), row.ref(8), kRel, "q8 " + at);
    expect_close(dot_q4g64_scalar(row.w4.as<uint8_t>(), row.s4.as<float>(), x, n), row.ref(4), kRel,
                 "q4 " + at);
  }
}

TEST(DenseKernel, SimdMatchesScalarAndDoubleLoop) {
  std::mt19937 rng(11);
  for (const DenseVariant& v : dense_simd_variants())
    for (int rep = 0; rep < 3; ++rep)
      for (int64_t n : kDenseCols) {
        DenseRow row(n, rng);
        const float* x = row.x.as<float>();
        const std::string at = std::string(v.name) + " n " + std::to_string(n);
        const Reference r32 = row.ref(32), r8 = row.ref(8), r4 = row.ref(4);
        const float a32 = v.dot_f32(row.wf.as<float>(), x, n);
        const float a8 = v.dot_q8(row.w8.as<int8_t>(), row.s8, x, n);
        const float a4 = v.dot_q4g64(row.w4.as<uint8_t>(), row.s4.as<float>(), x, n);
        expect_close(a32, r32, kRel, "f32 " + at);
        expect_close(a8, r8, kRel, "q8 " + at);
        expect_close(a4, r4, kRel, "q4 " + at);
        expect_close(a32, {dot_f32_scalar(row.wf.as<float>(), x, n), r32.sumabs}, kRel,
                     "vs scalar f32 " + at);
        expect_close(a8, {dot_q8_scalar(row.w8.as<int8_t>(), row.s8, x, n), r8.sumabs}, kRel,
                     "vs scalar q8 " + at);
        expect_close(a4,
                     {dot_q4g64_scalar(row.w4.as<uint8_t>(), row.s4.as<float>(), x, n), r4.sumabs},
                     kRel, "vs scalar q4 " + at);
      }
}

// The batched dots of each SIMD level give each token exactly the bits of the
// single dot of the same level.
TEST(DenseKernel, SimdBatchedDotsAreBitIdentical) {
  std::mt19937 rng(12);
  for (const DenseVariant& v : dense_simd_variants())
    for (int64_t n : kDenseCols) {
      DenseRow row(n, rng);
      for (int64_t T : {1, 2, 3, 4, 5, 7, 9}) {
        const int64_t ldx = n + 3;
        GuardedBuffer X(static_cast<size_t>(((T - 1) * ldx + n) * 4));
        const std::vector<float> xv = random_floats((T - 1) * ldx + n, rng);
        std::memcpy(X.as<float>(), xv.data(), xv.size() * 4);
        std::vector<float> o32(2 * T), o8(2 * T), o4(2 * T);
        v.dots_f32(row.wf.as<float>(), X.as<float>(), ldx, T, n, o32.data(), 2);
        v.dots_q8(row.w8.as<int8_t>(), row.s8, X.as<float>(), ldx, T, n, o8.data(), 2);
        const int64_t a = v.q4_prepared_align;
        const int64_t ldxp = (n + a - 1) / a * a;
        std::vector<float> XP(static_cast<size_t>(T * ldxp), 99.0f);
        for (int64_t t = 0; t < T; ++t)
          v.prepare_x_q4g64(X.as<float>() + t * ldx, n, XP.data() + t * ldxp);
        v.dots_q4g64_prepared(row.w4.as<uint8_t>(), row.s4.as<float>(), XP.data(), ldxp, T, n,
                              o4.data(), 2);
        for (int64_t t = 0; t < T; ++t) {
          const float* x = X.as<float>() + t * ldx;
          const std::string at =
              std::string(v.name) + " n " + std::to_string(n) + " T " + std::to_string(T);
          EXPECT_EQ(o32[2 * t], v.dot_f32(row.wf.as<float>(), x, n)) << at << " " << t;
          EXPECT_EQ(o8[2 * t], v.dot_q8(row.w8.as<int8_t>(), row.s8, x, n)) << at;
          const float single = v.dot_q4g64(row.w4.as<uint8_t>(), row.s4.as<float>(), x, n);
          EXPECT_EQ(o4[2 * t], single) << at << " " << t;
          EXPECT_EQ(single, v.dot_q4g64_prepared(row.w4.as<uint8_t>(), row.s4.as<float>(),
                                                 XP.data() + t * ldxp, n))
              << at;
        }
      }
    }
}

// The two-rows-at-a-time gemv gives every row the bits of its single dot.
TEST(DenseKernel, SimdGemvIsBitIdenticalToDots) {
  std::mt19937 rng(15);
  for (const DenseVariant& v : dense_simd_variants())
    for (int64_t n : kDenseCols)
      for (int64_t rows : {1, 2, 5}) {
        const int64_t groups = (n + 63) / 64;
        const int64_t a = v.q4_prepared_align;
        const std::vector<float> w = random_floats(rows * n, rng), x = random_floats(n, rng);
        std::vector<int8_t> w8(rows * n);
        std::vector<float> s8(rows), s4(rows * groups), xp((groups * 64 + a - 1) / a * a);
        std::vector<uint8_t> w4(rows * groups * 32);
        for (int64_t r = 0; r < rows; ++r) {
          quantize_row_q8(w.data() + r * n, n, w8.data() + r * n, &s8[r]);
          quantize_row_q4g64(w.data() + r * n, n, w4.data() + r * groups * 32,
                             s4.data() + r * groups);
        }
        v.prepare_x_q4g64(x.data(), n, xp.data());
        std::vector<float> y32(rows + 2, -1), y8(rows + 2, -1), y4(rows + 2, -1);
        v.gemv_f32(w.data(), n, x.data(), n, y32.data(), 0, rows);
        v.gemv_q8(w8.data(), n, s8.data(), x.data(), n, y8.data(), 0, rows);
        v.gemv_q4g64_prepared(w4.data(), s4.data(), xp.data(), n, y4.data(), 0, rows);
        for (int64_t r = 0; r < rows; ++r) {
          const std::string at =
              std::string(v.name) + " n " + std::to_string(n) + " row " + std::to_string(r);
          EXPECT_EQ(y32[r], v.dot_f32(w.data() + r * n, x.data(), n)) << at;
          EXPECT_EQ(y8[r], v.dot_q8(w8.data() + r * n, s8[r], x.data(), n)) << at;
          EXPECT_EQ(y4[r],
                    v.dot_q4g64(w4.data() + r * groups * 32, s4.data() + r * groups, x.data(), n))
              << at;
        }
        EXPECT_EQ(y32[rows], -1.0f);
        EXPECT_EQ(y8[rows], -1.0f);
        EXPECT_EQ(y4[rows], -1.0f);
      }
}

// matmul gives every (row, token) the bits matvec gives that token, whatever
// the variant in use (run the suite with K3_KERNELS=scalar for the other).
TEST(DenseKernel, MatmulEqualsMatvecBitwise) {
  std::mt19937 rng(13);
  for (int bits : {32, 8, 4})
    for (int64_t cols : {int64_t{7}, int64_t{65}, int64_t{200}, int64_t{3000}}) {
      const int64_t rows = 17;
      DenseMatrix m(bits, rows, cols);
      const std::vector<float> w = random_floats(rows * cols, rng);
      m.set_rows(0, rows, w.data());
      for (int64_t T : {1, 2, 5, 32}) {
        const int64_t ldx = cols + 1, ldy = rows + 2;
        const std::vector<float> X = random_floats(T * ldx, rng);
        std::vector<float> Y(T * ldy, -1.0f), y(rows);
        m.matmul(X.data(), ldx, T, Y.data(), ldy, 0, rows);
        for (int64_t t = 0; t < T; ++t) {
          m.matvec(X.data() + t * ldx, y.data(), 0, rows);
          for (int64_t r = 0; r < rows; ++r)
            ASSERT_EQ(Y[t * ldy + r], y[r])
                << bits << " bits, cols " << cols << " T " << T << " token " << t << " row " << r;
          for (int64_t r = rows; r < ldy; ++r) EXPECT_EQ(Y[t * ldy + r], -1.0f);
        }
        // A sub-range of rows computes those rows only, with the same bits.
        std::vector<float> Z(T * ldy, -1.0f);
        m.matmul(X.data(), ldx, T, Z.data(), ldy, 3, 11);
        for (int64_t t = 0; t < T; ++t)
          for (int64_t r = 0; r < rows; ++r)
            EXPECT_EQ(Z[t * ldy + r], (r >= 3 && r < 11) ? Y[t * ldy + r] : -1.0f);
      }
    }
}

// The kernels see the dequantized rows row_f32 reports.
TEST(DenseKernel, MatvecMatchesRowF32) {
  std::mt19937 rng(14);
  for (int bits : {32, 8, 4}) {
    const int64_t rows = 5, cols = 130;
    DenseMatrix m(bits, rows, cols);
    const std::vector<float> w = random_floats(rows * cols, rng);
    m.set_rows(0, rows, w.data());
    const std::vector<float> x = random_floats(cols, rng);
    std::vector<float> y(rows), row(cols);
    m.matvec(x.data(), y.data(), 0, rows);
    for (int64_t r = 0; r < rows; ++r) {
      m.row_f32(r, row.data());
      Reference ref;
      for (int64_t i = 0; i < cols; ++i) {
        ref.value += static_cast<double>(row[i]) * x[i];
        ref.sumabs += std::fabs(static_cast<double>(row[i]) * x[i]);
      }
      expect_close(y[r], ref, kRel, std::to_string(bits) + " bits row " + std::to_string(r));
    }
  }
}

}  // namespace
}  // namespace k3::kernels
