// The per-thread scratch of the kernel files (*_avx2.cpp, *_avx512.cpp, the
// AVX-512 helpers, dense.cpp), 64-byte aligned. In an unnamed namespace:
// each translation unit keeps its own copy, so the linker never merges code
// built with one ISA's flags into another's.
#pragma once

#include <cstddef>
#include <cstdlib>

namespace k3::kernels {
namespace {

// Per-thread scratch (the prepared x of every token of a call, decoded
// weights); grows, kept for the thread's lifetime; get() keeps no contents
// when it grows.
struct Scratch {
  void* p = nullptr;
  size_t bytes = 0;
  ~Scratch() { std::free(p); }
  void* get(size_t want) {
    if (want > bytes) {
      std::free(p);
      bytes = (want + 63) / 64 * 64;
      p = std::aligned_alloc(64, bytes);
      if (p == nullptr) std::abort();
    }
    return p;
  }
};
thread_local Scratch t_scratch;

}  // namespace
}  // namespace k3::kernels
