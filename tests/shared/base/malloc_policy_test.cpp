// The malloc policy (shared/base/malloc_policy.h): a 16 MiB buffer freed and
// allocated again is the same memory, not faulted in again (minor page
// faults, getrusage), where glibc's defaults unmap it on free.
#include "shared/base/malloc_policy.h"

#include <gtest/gtest.h>
#include <malloc.h>

#include <cstdlib>
#include <cstring>

#include "tests/test_util.h"

namespace k3::base {
namespace {

using k3::testing::minor_faults;

// Faults taken writing a fresh 16 MiB buffer after one was freed.
long faults_of_a_second_buffer() {
  constexpr size_t kBytes = size_t{16} << 20;
  auto* a = static_cast<char*>(std::malloc(kBytes));
  std::memset(a, 1, kBytes);
  asm volatile("" : : "r"(a) : "memory");  // the writes happen, the buffer exists
  std::free(a);
  const long f0 = minor_faults();
  auto* b = static_cast<char*>(std::malloc(kBytes));
  std::memset(b, 2, kBytes);
  asm volatile("" : : "r"(b) : "memory");
  const long f = minor_faults() - f0;
  std::free(b);
  return f;
}

TEST(MallocPolicy, AFreedBufferIsReusedWithoutFaultingItInAgain) {
  // glibc's starting thresholds first (set, since the dynamic ones depend
  // on what this process freed before): the buffer is unmapped on free and
  // its 4,096 pages fault in again.
  mallopt(M_MMAP_THRESHOLD, 128 << 10);
  mallopt(M_TRIM_THRESHOLD, 128 << 10);
  const long before = faults_of_a_second_buffer();
  keep_freed_memory_for_reuse();
  const long after = faults_of_a_second_buffer();
  EXPECT_LT(after, 64) << "faults with the policy; " << before << " without";
  EXPECT_GT(before, 1000);
}

}  // namespace
}  // namespace k3::base
