// Huge-page buffers (shared/base/huge_pages.h): 2 MiB-aligned, zero-filled,
// faulted in 2 MiB at a time where the kernel has transparent huge pages (a
// 64 MiB buffer: 32 faults instead of 16,384); large std::vector blocks come
// from them, small ones from the heap; HugeArray owns its mapping (moves,
// frees once).
#include "shared/base/huge_pages.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

#include "tests/test_util.h"

namespace k3::base {
namespace {

using k3::testing::minor_faults;

// THP's mode, the bracketed word of the sysfs setting ("" when unknown).
std::string thp_mode() {
  std::ifstream f("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string s;
  std::getline(f, s);
  const auto a = s.find('['), b = s.find(']');
  return a == std::string::npos || b == std::string::npos ? "" : s.substr(a + 1, b - a - 1);
}

TEST(HugePages, ABufferIsAlignedZeroFilledAndWritable) {
  constexpr size_t kBytes = (size_t{8} << 20) + 123;
  auto* p = static_cast<unsigned char*>(map_huge_buffer(kBytes));
  ASSERT_NE(p, nullptr);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(p) % (size_t{2} << 20), 0u);
  for (size_t i = 0; i < kBytes; i += 4093) ASSERT_EQ(p[i], 0) << "at " << i;
  EXPECT_EQ(p[kBytes - 1], 0);
  std::memset(p, 0xab, kBytes);
  EXPECT_EQ(p[kBytes - 1], 0xab);
  unmap_huge_buffer(p, kBytes);
}

TEST(HugePages, ALargeBufferFaultsInAHugePageAtATime) {
  const std::string mode = thp_mode();
  if (mode != "always" && mode != "madvise")
    GTEST_SKIP() << "transparent huge pages are '" << mode << "' on this machine";
  constexpr size_t kBytes = size_t{64} << 20;
  auto* p = static_cast<char*>(map_huge_buffer(kBytes));
  const long f0 = minor_faults();
  std::memset(p, 1, kBytes);
  asm volatile("" : : "r"(p) : "memory");
  const long f = minor_faults() - f0;
  unmap_huge_buffer(p, kBytes);
  // 32 huge pages; some slack for a page the kernel could not find whole.
  EXPECT_LT(f, 1024) << "4 KiB pages would take 16,384 faults";
}

TEST(HugePages, VectorsTakeLargeBlocksFromHugeBuffersAndSmallOnesFromTheHeap) {
  HugeVector<float> big(size_t{4} << 20);  // 16 MiB
  EXPECT_EQ(reinterpret_cast<uintptr_t>(big.data()) % (size_t{2} << 20), 0u);
  for (size_t i = 0; i < big.size(); i += 1021) ASSERT_EQ(big[i], 0.0f);
  big[big.size() - 1] = 3.0f;
  HugeVector<float> copy = big;
  EXPECT_EQ(copy.back(), 3.0f);
  EXPECT_NE(copy.data(), big.data());
  HugeVector<float> small(100, 1.5f);
  EXPECT_EQ(small[99], 1.5f);
  small.assign(big.begin(), big.end());  // grows from the heap into a huge buffer
  EXPECT_EQ(small.back(), 3.0f);
}

TEST(HugePages, AnArrayOwnsItsMappingAndMovesIt) {
  HugeArray<float> a(size_t{3} << 20);  // 12 MiB
  ASSERT_TRUE(a);
  EXPECT_EQ(a.size(), size_t{3} << 20);
  a[a.size() - 1] = 7.0f;
  float* p = a.get();
  HugeArray<float> b(std::move(a));
  EXPECT_FALSE(a);  // NOLINT: moved-from is empty by contract
  EXPECT_EQ(b.get(), p);
  EXPECT_EQ(b[b.size() - 1], 7.0f);
  HugeArray<float> c;
  c = std::move(b);
  EXPECT_EQ(c.get(), p);
  c.reset();
  EXPECT_FALSE(c);
  HugeArray<float> small(16);  // from the heap
  small[15] = 1.0f;
  EXPECT_EQ(small[15], 1.0f);
}

}  // namespace
}  // namespace k3::base
