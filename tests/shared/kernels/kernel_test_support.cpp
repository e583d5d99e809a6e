// The kernel variants the tests run, and link stand-ins for the SIMD kernel
// variants in builds without them (see below); shared by the kernel tests.
#include "tests/shared/kernels/kernel_test_support.h"

#include <cstdint>
#include <cstdio>
#include <cstdlib>

#include "shared/kernels/dense.h"
#include "shared/kernels/mxfp4.h"

#ifndef K3_HAVE_AVX2_KERNELS
// This build has no AVX2 variants (not x86_64, or -DK3_AVX2=OFF):
// cpu_supports_avx2() is false, so every comparison below skips before calling
// one. These definitions only satisfy the linker and abort if ever reached.
namespace k3::kernels {
#define K3_NO_AVX2(sig) \
  sig {                 \
    std::abort();       \
  }
K3_NO_AVX2(float dot_f32_avx2(const float*, const float*, int64_t))
K3_NO_AVX2(float dot_q8_avx2(const int8_t*, float, const float*, int64_t))
K3_NO_AVX2(float dot_q4g64_avx2(const uint8_t*, const float*, const float*, int64_t))
K3_NO_AVX2(void prepare_x_q4g64_avx2(const float*, int64_t, float*))
K3_NO_AVX2(float dot_q4g64_prepared_avx2(const uint8_t*, const float*, const float*, int64_t))
K3_NO_AVX2(void dots_f32_avx2(const float*, const float*, int64_t, int64_t, int64_t, float*,
                              int64_t))
K3_NO_AVX2(void dots_q8_avx2(const int8_t*, float, const float*, int64_t, int64_t, int64_t, float*,
                             int64_t))
K3_NO_AVX2(void dots_q4g64_prepared_avx2(const uint8_t*, const float*, const float*, int64_t,
                                         int64_t, int64_t, float*, int64_t))
K3_NO_AVX2(void gemv_f32_avx2(const float*, int64_t, const float*, int64_t, float*, int64_t,
                              int64_t))
K3_NO_AVX2(void gemv_q8_avx2(const int8_t*, int64_t, const float*, const float*, int64_t, float*,
                             int64_t, int64_t))
K3_NO_AVX2(void gemv_q4g64_prepared_avx2(const uint8_t*, const float*, const float*, int64_t,
                                         float*, int64_t, int64_t))
K3_NO_AVX2(void mxfp4_matvec_f32_avx2(const Mxfp4Matrix&, const float*, float*, int64_t, int64_t))
K3_NO_AVX2(void mxfp4_matvec_q8_avx2(const Mxfp4Matrix&, const int8_t*, const float*, float*,
                                     int64_t, int64_t))
K3_NO_AVX2(void mxfp4_matmul_q8_avx2(const Mxfp4Matrix&, const int8_t*, int64_t, const float*,
                                     int64_t, int64_t, float*, int64_t, int64_t, int64_t))
K3_NO_AVX2(void mxfp4_matmul_f32_avx2(const Mxfp4Matrix&, const float*, int64_t, int64_t, float*,
                                      int64_t, int64_t, int64_t))
#undef K3_NO_AVX2
}  // namespace k3::kernels
#endif

#ifndef K3_HAVE_AVX512_KERNELS
// This build has no AVX-512 variants: cpu_supports_avx512() is false, so the
// tests never list them (kernel_variants below). Linker stand-ins only.
namespace k3::kernels {
#define K3_NO_AVX512(sig) \
  sig {                   \
    std::abort();         \
  }
K3_NO_AVX512(void mxfp4_matvec_f32_avx512(const Mxfp4Matrix&, const float*, float*, int64_t,
                                          int64_t))
K3_NO_AVX512(void mxfp4_matvec_q8_avx512(const Mxfp4Matrix&, const int8_t*, const float*, float*,
                                         int64_t, int64_t))
K3_NO_AVX512(void mxfp4_matmul_q8_avx512(const Mxfp4Matrix&, const int8_t*, int64_t, const float*,
                                         int64_t, int64_t, float*, int64_t, int64_t, int64_t))
K3_NO_AVX512(void mxfp4_matmul_q8_avx512_novbmi(const Mxfp4Matrix&, const int8_t*, int64_t,
                                                const float*, int64_t, int64_t, float*, int64_t,
                                                int64_t, int64_t))
K3_NO_AVX512(void mxfp4_matmul_f32_avx512(const Mxfp4Matrix&, const float*, int64_t, int64_t,
                                          float*, int64_t, int64_t, int64_t))
K3_NO_AVX512(float dot_f32_avx512(const float*, const float*, int64_t))
K3_NO_AVX512(float dot_q8_avx512(const int8_t*, float, const float*, int64_t))
K3_NO_AVX512(float dot_q4g64_avx512(const uint8_t*, const float*, const float*, int64_t))
K3_NO_AVX512(void prepare_x_q4g64_avx512(const float*, int64_t, float*))
K3_NO_AVX512(float dot_q4g64_prepared_avx512(const uint8_t*, const float*, const float*, int64_t))
K3_NO_AVX512(void dots_f32_avx512(const float*, const float*, int64_t, int64_t, int64_t, float*,
                                  int64_t))
K3_NO_AVX512(void dots_q8_avx512(const int8_t*, float, const float*, int64_t, int64_t, int64_t,
                                 float*, int64_t))
K3_NO_AVX512(void dots_q4g64_prepared_avx512(const uint8_t*, const float*, const float*, int64_t,
                                             int64_t, int64_t, float*, int64_t))
K3_NO_AVX512(void gemv_f32_avx512(const float*, int64_t, const float*, int64_t, float*, int64_t,
                                  int64_t))
K3_NO_AVX512(void gemv_q8_avx512(const int8_t*, int64_t, const float*, const float*, int64_t,
                                 float*, int64_t, int64_t))
K3_NO_AVX512(void gemv_q4g64_prepared_avx512(const uint8_t*, const float*, const float*, int64_t,
                                             float*, int64_t, int64_t))
K3_NO_AVX512(void gemm_f32_avx512(const float*, int64_t, const float*, int64_t, int64_t, int64_t,
                                  float*, int64_t, int64_t, int64_t))
K3_NO_AVX512(void gemm_q8_avx512(const int8_t*, int64_t, const float*, const float*, int64_t,
                                 int64_t, int64_t, float*, int64_t, int64_t, int64_t))
K3_NO_AVX512(void gemm_q4g64_prepared_avx512(const uint8_t*, const float*, const float*, int64_t,
                                             int64_t, int64_t, float*, int64_t, int64_t, int64_t))
#undef K3_NO_AVX512
}  // namespace k3::kernels
#endif

namespace k3::kernels::testing {

std::vector<Mxfp4Variant> mxfp4_variants() {
  std::vector<Mxfp4Variant> out;
  for (base::KernelIsa isa : base::supported_kernel_isas()) {
    if (isa == base::KernelIsa::kScalar)
      out.push_back({isa, "scalar", mxfp4_matvec_f32_scalar, mxfp4_matvec_q8_scalar,
                     mxfp4_matmul_f32_scalar, mxfp4_matmul_q8_scalar});
    else if (isa == base::KernelIsa::kAvx2)
      out.push_back({isa, "avx2", mxfp4_matvec_f32_avx2, mxfp4_matvec_q8_avx2,
                     mxfp4_matmul_f32_avx2, mxfp4_matmul_q8_avx2});
    else
      out.push_back({isa, "avx512", mxfp4_matvec_f32_avx512, mxfp4_matvec_q8_avx512,
                     mxfp4_matmul_f32_avx512, mxfp4_matmul_q8_avx512});
  }
  return out;
}

std::vector<DenseVariant> dense_simd_variants() {
  std::vector<DenseVariant> out;
  if (base::cpu_supports_avx2())
    out.push_back({base::KernelIsa::kAvx2, "avx2", 64, dot_f32_avx2, dot_q8_avx2, dot_q4g64_avx2,
                   prepare_x_q4g64_avx2, dot_q4g64_prepared_avx2, dots_f32_avx2, dots_q8_avx2,
                   dots_q4g64_prepared_avx2, gemv_f32_avx2, gemv_q8_avx2,
                   gemv_q4g64_prepared_avx2});
  if (base::cpu_supports_avx512())
    out.push_back({base::KernelIsa::kAvx512, "avx512", 128, dot_f32_avx512, dot_q8_avx512,
                   dot_q4g64_avx512, prepare_x_q4g64_avx512, dot_q4g64_prepared_avx512,
                   dots_f32_avx512, dots_q8_avx512, dots_q4g64_prepared_avx512, gemv_f32_avx512,
                   gemv_q8_avx512, gemv_q4g64_prepared_avx512});
  return out;
}

std::string tested_variant_names() {
  std::string s;
  for (base::KernelIsa isa : base::supported_kernel_isas()) {
    if (!s.empty()) s += ' ';
    s += std::string(base::kernel_isa_name(isa));
  }
  return s;
}

}  // namespace k3::kernels::testing
