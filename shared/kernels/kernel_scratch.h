// The per-thread scratch of the SIMD kernel files (*_avx2.cpp, the AVX-512
// helpers), included by those only. In an unnamed namespace: each ISA
// translation unit keeps its own copy, so the linker never merges code built
// with one ISA's flags into another's.
#pragma once

#include <cstddef>
#include <cstdlib>

namespace k3::kernels {
namespace {

// Per-thread scratch for the prepared x of every token of a call; grows, kept
// for the thread's lifetime.
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
