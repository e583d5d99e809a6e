#include "shared/base/huge_pages.h"

#include <sys/mman.h>

#include <cstdint>

namespace k3::base {
namespace {

constexpr size_t kHuge = size_t{2} << 20;

size_t round_up(size_t bytes) {
  return (bytes + kHuge - 1) / kHuge * kHuge;
}

}  // namespace

void* map_huge_buffer(size_t bytes) {
  const size_t len = round_up(bytes);
  if (len < bytes) throw std::bad_alloc();
  // Map a huge page more than needed and trim both ends to a 2 MiB boundary
  // (mmap aligns to 4 KiB only; the kernel backs aligned 2 MiB ranges alone).
  void* raw =
      mmap(nullptr, len + kHuge, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED) throw std::bad_alloc();
  const auto a = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t start = (a + kHuge - 1) / kHuge * kHuge;
  if (start > a) munmap(raw, start - a);
  const uintptr_t end = start + len;
  if (a + len + kHuge > end) munmap(reinterpret_cast<void*>(end), a + len + kHuge - end);
  // Advice only: without THP the buffer is ordinary pages.
  (void)madvise(reinterpret_cast<void*>(start), len, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(start);
}

void unmap_huge_buffer(void* p, size_t bytes) noexcept {
  if (p != nullptr) munmap(p, round_up(bytes));
}

}  // namespace k3::base
