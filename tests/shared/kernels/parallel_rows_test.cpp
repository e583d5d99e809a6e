// shared/kernels/parallel_rows.h: the chunks cover every row once, whatever
// the thread count (one thread: one call), and a kernel split into chunks
// gives the bits of one call.
#include "shared/kernels/parallel_rows.h"

#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <vector>

#include "shared/kernels/dense.h"
#include "shared/kernels/mxfp4.h"

namespace k3::kernels {
namespace {

TEST(ParallelRows, ChunksAreWholeRowGroupsAndFewPerThread) {
  EXPECT_EQ(row_chunk(3072, 3584, 2), 384);         // 8 chunks for 2 threads
  EXPECT_EQ(row_chunk(3072, 8 * 3584, 2, 8), 768);  // several tokens: 4 chunks
  EXPECT_EQ(row_chunk(1000, 3584, 2) % 16, 0);
  EXPECT_EQ(row_chunk(10, 1 << 20, 4), 1);  // never 0, never more than asked
  EXPECT_EQ(row_chunk(7, 1, 2), 7);         // tiny work: one chunk
  EXPECT_GE(row_chunk(100000, 8, 2) * 8, kMinChunkWork);
}

TEST(ParallelRows, EveryRowIsCoveredOnceOnAnyThreadCount) {
  for (int threads : {1, 2, 3, 5})
    for (int64_t rows : {1, 2, 15, 16, 17, 1000, 4099})
      for (int64_t chunk : {1, 7, 16, 1000, 5000}) {
        std::vector<std::atomic<int>> seen(static_cast<size_t>(rows));
        std::atomic<int> calls{0};
        parallel_row_chunks(
            rows, chunk,
            [&](int64_t r0, int64_t r1) {
              ASSERT_LT(r0, r1);
              if (threads > 1) ASSERT_LE(r1 - r0, chunk);
              for (int64_t r = r0; r < r1; ++r) seen[static_cast<size_t>(r)]++;
              calls++;
            },
            threads);
        for (int64_t r = 0; r < rows; ++r)
          ASSERT_EQ(seen[static_cast<size_t>(r)].load(), 1)
              << "row " << r << " of " << rows << ", chunk " << chunk << ", threads " << threads;
        // One thread: one call over all rows; else one call per chunk.
        EXPECT_EQ(calls.load(),
                  threads == 1 ? 1 : (rows + std::min(chunk, rows) - 1) / std::min(chunk, rows));
      }
}

TEST(ParallelRows, SmallWorkRunsAsOneCallOnThisThread) {
  int calls = 0;
  int64_t got0 = -1, got1 = -1;
  parallel_rows(
      100, 10, 1,
      [&](int64_t r0, int64_t r1) {
        calls++;
        got0 = r0;
        got1 = r1;
      },
      2);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(got0, 0);
  EXPECT_EQ(got1, 100);
  parallel_rows(
      0, 1 << 20, 1, [&](int64_t, int64_t) { calls++; }, 2);
  EXPECT_EQ(calls, 1);  // no rows: no call
}

// The q8 MXFP4 matvec and the int4 dense matvec, on a shape whose chunks end
// inside row groups: chunked on 2 and 3 threads, each gives the bits of one
// call over all rows.
TEST(ParallelRows, ChunkedKernelsGiveTheBitsOfOneCall) {
  constexpr int64_t kRows = 1037, kCols = 512;
  std::vector<uint8_t> packed(static_cast<size_t>(kRows * kCols / 2)),
      scales(static_cast<size_t>(kRows * kCols / 32));
  for (size_t i = 0; i < packed.size(); ++i)
    packed[i] = static_cast<uint8_t>(i * 2654435761u >> 13);
  for (size_t i = 0; i < scales.size(); ++i) scales[i] = static_cast<uint8_t>(118 + i % 8);
  const Mxfp4Matrix m{packed.data(), scales.data(), kRows, kCols};
  std::vector<float> x(kCols);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 2001) / 1000 - 1;
  std::vector<int8_t> xq(kCols);
  std::vector<float> xs(kCols / 32);
  quantize_q8_32(x.data(), kCols, xq.data(), xs.data());
  std::vector<float> whole(kRows), split(kRows);
  mxfp4_matvec_q8(m, xq.data(), xs.data(), whole.data(), 0, kRows);

  DenseMatrix d(4, kRows, kCols);
  std::vector<float> src(static_cast<size_t>(kRows * kCols));
  for (size_t i = 0; i < src.size(); ++i)
    src[i] = static_cast<float>((i * 40503) % 2001) / 1000 - 1;
  d.set_rows(0, kRows, src.data());
  std::vector<float> dwhole(kRows), dsplit(kRows);
  d.matvec(x.data(), dwhole.data(), 0, kRows);

  for (int threads : {2, 3})
    for (int64_t chunk : {5, 16, 100}) {
      std::fill(split.begin(), split.end(), -1.0f);
      parallel_row_chunks(
          kRows, chunk,
          [&](int64_t r0, int64_t r1) {
            mxfp4_matvec_q8(m, xq.data(), xs.data(), split.data(), r0, r1);
          },
          threads);
      EXPECT_EQ(std::memcmp(whole.data(), split.data(), sizeof(float) * kRows), 0)
          << "mxfp4 q8, chunk " << chunk << ", threads " << threads;
      std::fill(dsplit.begin(), dsplit.end(), -1.0f);
      parallel_row_chunks(
          kRows, chunk, [&](int64_t r0, int64_t r1) { d.matvec(x.data(), dsplit.data(), r0, r1); },
          threads);
      EXPECT_EQ(std::memcmp(dwhole.data(), dsplit.data(), sizeof(float) * kRows), 0)
          << "dense int4, chunk " << chunk << ", threads " << threads;
    }
}

}  // namespace
}  // namespace k3::kernels
