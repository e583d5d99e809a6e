// Link stand-ins for the AVX2 kernel variants in builds without them (see
// below); shared by the kernel tests.
#include <cstdint>
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
#undef K3_NO_AVX2
}  // namespace k3::kernels
#endif
