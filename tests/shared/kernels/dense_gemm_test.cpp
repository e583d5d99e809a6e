// The AVX-512 tiled GEMM of the dense kernels (shared/kernels/dense_gemm_avx512.cpp)
// against the AVX-512 single dots, bit for bit: f32, int8 and int4 weights,
// shapes that leave partial register tiles, row blocks and column blocks and
// every kind of column tail, sub-ranges of rows, output strides, and inputs
// whose last byte is followed by an inaccessible page (a read past a row or a
// token faults). Skipped on a CPU or build without AVX-512.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "shared/base/cpu_features.h"
#include "shared/kernels/dense.h"
#include "tests/shared/kernels/kernel_test_support.h"

namespace k3::kernels {
namespace {

using testing::GuardedBuffer;
using testing::random_floats;

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

// One shape: rows x n weights quantized three ways, T tokens ldx apart.
void check_shape(int64_t rows, int64_t n, int64_t T, int64_t r0, int64_t r1, std::mt19937& rng) {
  const int64_t groups = (n + 63) / 64, ldx = n + 5, ldy = rows + 3;
  const int64_t ldxp = (groups * 64 + 127) / 128 * 128;
  const std::vector<float> w = random_floats(rows * n, rng);
  GuardedBuffer wf(static_cast<size_t>(rows * n * 4)), w8(static_cast<size_t>(rows * n)),
      w4(static_cast<size_t>(rows * groups * 32)), X(static_cast<size_t>(((T - 1) * ldx + n) * 4));
  std::vector<float> s8(rows), s4(rows * groups);
  std::memcpy(wf.as<float>(), w.data(), w.size() * 4);
  for (int64_t r = 0; r < rows; ++r) {
    quantize_row_q8(w.data() + r * n, n, w8.as<int8_t>() + r * n, &s8[r]);
    quantize_row_q4g64(w.data() + r * n, n, w4.as<uint8_t>() + r * groups * 32,
                       s4.data() + r * groups);
  }
  const std::vector<float> xv = random_floats((T - 1) * ldx + n, rng);
  std::memcpy(X.as<float>(), xv.data(), xv.size() * 4);
  GuardedBuffer XP(static_cast<size_t>(T * ldxp * 4));
  for (int64_t t = 0; t < T; ++t)
    prepare_x_q4g64_avx512(X.as<float>() + t * ldx, n, XP.as<float>() + t * ldxp);

  std::vector<float> y32(T * ldy, -1.0f), y8(T * ldy, -1.0f), y4(T * ldy, -1.0f);
  gemm_f32_avx512(wf.as<float>(), n, X.as<float>(), ldx, T, n, y32.data(), ldy, r0, r1);
  gemm_q8_avx512(w8.as<int8_t>(), n, s8.data(), X.as<float>(), ldx, T, n, y8.data(), ldy, r0, r1);
  gemm_q4g64_prepared_avx512(w4.as<uint8_t>(), s4.data(), XP.as<float>(), ldxp, T, n, y4.data(),
                             ldy, r0, r1);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t r = 0; r < ldy; ++r) {
      const std::string at = "rows " + std::to_string(rows) + " n " + std::to_string(n) + " T " +
                             std::to_string(T) + " token " + std::to_string(t) + " row " +
                             std::to_string(r);
      const size_t i = static_cast<size_t>(t * ldy + r);
      if (r < r0 || r >= r1) {  // rows outside the range are not written
        ASSERT_EQ(y32[i], -1.0f) << at;
        ASSERT_EQ(y8[i], -1.0f) << at;
        ASSERT_EQ(y4[i], -1.0f) << at;
        continue;
      }
      const float* x = X.as<float>() + t * ldx;
      ASSERT_TRUE(same_bits(y32[i], dot_f32_avx512(wf.as<float>() + r * n, x, n))) << "f32 " << at;
      ASSERT_TRUE(same_bits(y8[i], dot_q8_avx512(w8.as<int8_t>() + r * n, s8[r], x, n)))
          << "int8 " << at;
      ASSERT_TRUE(same_bits(
          y4[i], dot_q4g64_prepared_avx512(w4.as<uint8_t>() + r * groups * 32,
                                           s4.data() + r * groups, XP.as<float>() + t * ldxp, n)))
          << "int4 " << at;
      ASSERT_TRUE(same_bits(y4[i], dot_q4g64_avx512(w4.as<uint8_t>() + r * groups * 32,
                                                    s4.data() + r * groups, x, n)))
          << "int4 unprepared " << at;
    }
}

bool have_avx512() {
#ifdef K3_HAVE_AVX512_KERNELS
  return base::cpu_supports_avx512();
#else
  return false;
#endif
}

TEST(DenseGemm, EveryTailAndTileIsBitIdenticalToTheSingleDot) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512 here";
  std::mt19937 rng(21);
  for (int64_t n : {1, 15, 16, 17, 63, 64, 65, 127, 128, 129, 200, 1023, 1024, 1090, 2113})
    for (int64_t rows : {1, 3, 5, 9})
      for (int64_t T : {1, 5, 6, 7, 13}) check_shape(rows, n, T, 0, rows, rng);
}

TEST(DenseGemm, RowBlocksAndSubRangesAreBitIdentical) {
  if (!have_avx512()) GTEST_SKIP() << "no AVX-512 here";
  std::mt19937 rng(22);
  // 37 rows: several row blocks and a partial tile; 7168 and 12288 + 40
  // columns: several column blocks (the real model's widths, and a tail).
  check_shape(37, 7168, 14, 0, 37, rng);
  check_shape(37, 12328, 8, 3, 30, rng);
  check_shape(40, 3000, 25, 17, 40, rng);
  // 300 rows of 7168: several row blocks at every width (int4 and int8 blocks
  // hold up to 128 and 72 such rows).
  check_shape(300, 7168, 7, 0, 300, rng);
}

// DenseMatrix::matmul takes the tiled GEMM from 6 tokens on (under AVX-512):
// the results stay those of matvec.
TEST(DenseGemm, MatmulOfManyTokensEqualsMatvec) {
  std::mt19937 rng(23);
  for (int bits : {32, 8, 4}) {
    const int64_t rows = 45, cols = 2100, T = 19;
    DenseMatrix m(bits, rows, cols);
    const std::vector<float> w = random_floats(rows * cols, rng);
    m.set_rows(0, rows, w.data());
    const std::vector<float> X = random_floats(T * cols, rng);
    std::vector<float> Y(T * rows), y(rows);
    m.matmul(X.data(), cols, T, Y.data(), rows, 0, rows);
    for (int64_t t = 0; t < T; ++t) {
      m.matvec(X.data() + t * cols, y.data(), 0, rows);
      for (int64_t r = 0; r < rows; ++r)
        ASSERT_TRUE(same_bits(Y[t * rows + r], y[r]))
            << bits << " bits, token " << t << " row " << r;
    }
  }
}

}  // namespace
}  // namespace k3::kernels
