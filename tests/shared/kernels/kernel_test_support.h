// Shared by the kernel tests (mxfp4_test.cpp, dense_test.cpp):
// the tolerance rule, guarded buffers, random data and the double-precision
// reference's result type.
//
// Tolerances: float results are compared as |a - b| <= kRel * sum_i |w_i x_i t_i|
// (the sum of the magnitudes of the terms, so cancellation in random data does
// not inflate a relative error); kRel = 1e-5 (f32 summation of up to 3584
// terms in a different order). The q8 kernels are compared to a double loop on
// the same quantized activations, with the same bound.
#pragma once

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmath>
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "shared/base/cpu_features.h"
#include "shared/kernels/mxfp4.h"

namespace k3::kernels::testing {

// One ISA level's MXFP4 kernels (every level this machine and build can run is
// tested, not only the one kernel_isa() dispatches to).
struct Mxfp4Variant {
  base::KernelIsa isa;
  const char* name;
  void (*matvec_f32)(const Mxfp4Matrix&, const float*, float*, int64_t, int64_t);
  void (*matvec_q8)(const Mxfp4Matrix&, const int8_t*, const float*, float*, int64_t, int64_t);
  void (*matmul_f32)(const Mxfp4Matrix&, const float*, int64_t, int64_t, float*, int64_t, int64_t,
                     int64_t);
  void (*matmul_q8)(const Mxfp4Matrix&, const int8_t*, int64_t, const float*, int64_t, int64_t,
                    float*, int64_t, int64_t, int64_t);
};
// Scalar first, then every SIMD level supported here.
std::vector<Mxfp4Variant> mxfp4_variants();

// One SIMD level's dense kernels (shared/kernels/dense.h).
struct DenseVariant {
  base::KernelIsa isa;
  const char* name;
  int64_t q4_prepared_align;  // prepared int4 x: floats rounded up to this
  float (*dot_f32)(const float*, const float*, int64_t);
  float (*dot_q8)(const int8_t*, float, const float*, int64_t);
  float (*dot_q4g64)(const uint8_t*, const float*, const float*, int64_t);
  void (*prepare_x_q4g64)(const float*, int64_t, float*);
  float (*dot_q4g64_prepared)(const uint8_t*, const float*, const float*, int64_t);
  void (*dots_f32)(const float*, const float*, int64_t, int64_t, int64_t, float*, int64_t);
  void (*dots_q8)(const int8_t*, float, const float*, int64_t, int64_t, int64_t, float*, int64_t);
  void (*dots_q4g64_prepared)(const uint8_t*, const float*, const float*, int64_t, int64_t, int64_t,
                              float*, int64_t);
  void (*gemv_f32)(const float*, int64_t, const float*, int64_t, float*, int64_t, int64_t);
  void (*gemv_q8)(const int8_t*, int64_t, const float*, const float*, int64_t, float*, int64_t,
                  int64_t);
  void (*gemv_q4g64_prepared)(const uint8_t*, const float*, const float*, int64_t, float*, int64_t,
                              int64_t);
};
// Every SIMD level supported here (none on a machine without AVX2).
std::vector<DenseVariant> dense_simd_variants();
// "scalar avx2 avx512" (the levels supported here).
std::string tested_variant_names();

constexpr double kRel = 1e-5;

// Memory whose last byte is followed by an inaccessible page: a kernel that
// reads past the end of its input faults.
class GuardedBuffer {
 public:
  explicit GuardedBuffer(size_t bytes) : bytes_(bytes) {
    const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    const size_t data_pages = (bytes + page - 1) / page;
    total_ = (data_pages + 1) * page;
    void* p = mmap(nullptr, total_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    EXPECT_NE(p, MAP_FAILED);
    base_ = static_cast<uint8_t*>(p);
    EXPECT_EQ(mprotect(base_ + data_pages * page, page, PROT_NONE), 0);
    data_ = base_ + data_pages * page - bytes;
  }
  ~GuardedBuffer() { munmap(base_, total_); }
  GuardedBuffer(const GuardedBuffer&) = delete;
  GuardedBuffer& operator=(const GuardedBuffer&) = delete;

  template <typename T>
  T* as() {
    return reinterpret_cast<T*>(data_);
  }
  size_t bytes() const { return bytes_; }

 private:
  uint8_t* base_ = nullptr;
  uint8_t* data_ = nullptr;
  size_t total_ = 0, bytes_ = 0;
};

inline std::vector<float> random_floats(int64_t n, std::mt19937& rng, float lo = -1.0f,
                                        float hi = 1.0f) {
  std::uniform_real_distribution<float> d(lo, hi);
  std::vector<float> v(static_cast<size_t>(n));
  for (auto& f : v) f = d(rng);
  return v;
}

struct Reference {
  double value = 0;   // the dot product in double
  double sumabs = 0;  // sum of |terms| (the error scale)
};

inline void expect_close(float got, const Reference& ref, double rel, const std::string& what) {
  const double tol = rel * ref.sumabs + 1e-30;
  EXPECT_LE(std::fabs(static_cast<double>(got) - ref.value), tol)
      << what << ": got " << got << " want " << ref.value << " (sum|terms| " << ref.sumabs << ")";
}

}  // namespace k3::kernels::testing
