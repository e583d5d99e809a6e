// Large scratch buffers on transparent huge pages. A long prompt's buffers
// are tens to hundreds of MB (a lane's rows: T x 7,168 floats each; a MoE
// layer's routed rows: T x 16 x 3,584 floats, 470 MB at 2,048 tokens), above
// glibc's largest mmap threshold (32 MiB), so each allocation is a fresh
// mapping the kernel faults in page by page: 4 KiB at a time, about 20 us a
// fault on a VM, a quarter of a second per 50 MB. These buffers are mapped
// 2 MiB-aligned and advised MADV_HUGEPAGE, so the kernel faults them in
// 2 MiB at a time where it has huge pages (THP "always" or "madvise"); where
// it has none (THP "never", fragmented memory) they are ordinary pages.
// Smaller requests go to the heap as before.
#pragma once

#include <cstddef>
#include <memory>
#include <new>
#include <vector>

namespace k3::base {

// Requests of at least this many bytes are mapped as huge-page buffers.
inline constexpr size_t kHugeBufferMinBytes = size_t{4} << 20;

// A mapping of at least `bytes` (rounded up to 2 MiB), 2 MiB-aligned, advised
// as huge pages, zero-filled by the kernel as it is touched. Throws
// std::bad_alloc when it cannot be mapped.
void* map_huge_buffer(size_t bytes);
// Unmaps what map_huge_buffer(bytes) returned (the same `bytes`).
void unmap_huge_buffer(void* p, size_t bytes) noexcept;

// A std::allocator whose large blocks are huge-page buffers.
template <class T>
struct HugePageAllocator {
  using value_type = T;
  HugePageAllocator() = default;
  template <class U>
  HugePageAllocator(const HugePageAllocator<U>&) noexcept {}  // NOLINT: rebinding
  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    const size_t bytes = n * sizeof(T);
    if (bytes >= kHugeBufferMinBytes) return static_cast<T*>(map_huge_buffer(bytes));
    return std::allocator<T>().allocate(n);
  }
  void deallocate(T* p, size_t n) noexcept {
    if (n * sizeof(T) >= kHugeBufferMinBytes)
      unmap_huge_buffer(p, n * sizeof(T));
    else
      std::allocator<T>().deallocate(p, n);
  }
  template <class U>
  bool operator==(const HugePageAllocator<U>&) const noexcept {
    return true;
  }
};

template <class T>
using HugeVector = std::vector<T, HugePageAllocator<T>>;

// A fixed-size array left uninitialised (its pages come zero-filled from the
// kernel when mapped, but the contents are to be written before they are
// read): for buffers filled row by row.
template <class T>
class HugeArray {
 public:
  HugeArray() = default;
  explicit HugeArray(size_t n) : n_(n), p_(HugePageAllocator<T>().allocate(n)) {}
  HugeArray(HugeArray&& o) noexcept : n_(o.n_), p_(o.p_) { o.n_ = 0, o.p_ = nullptr; }
  HugeArray& operator=(HugeArray&& o) noexcept {
    if (this != &o) {
      reset();
      n_ = o.n_, p_ = o.p_;
      o.n_ = 0, o.p_ = nullptr;
    }
    return *this;
  }
  HugeArray(const HugeArray&) = delete;
  HugeArray& operator=(const HugeArray&) = delete;
  ~HugeArray() { reset(); }

  T* get() const { return p_; }
  T& operator[](size_t i) const { return p_[i]; }
  size_t size() const { return n_; }
  explicit operator bool() const { return p_ != nullptr; }
  void reset() {
    if (p_ != nullptr) HugePageAllocator<T>().deallocate(p_, n_);
    p_ = nullptr, n_ = 0;
  }

 private:
  size_t n_ = 0;
  T* p_ = nullptr;
};

}  // namespace k3::base
