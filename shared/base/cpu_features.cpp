#include "shared/base/cpu_features.h"

#include <cstdlib>
#if defined(__x86_64__)
#include <cpuid.h>
#endif
#include <cstring>

namespace k3 {

bool cpu_supports_avx2() {
#if defined(__x86_64__) && defined(K3_HAVE_AVX2_KERNELS)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), f16c = c & (1u << 29);
  if (!fma || !osxsave || !f16c) return false;
  // The OS must save the YMM registers (XCR0 bits 1 and 2).
  unsigned lo, hi;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  if ((lo & 6u) != 6u) return false;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return b & (1u << 5);  // AVX2
#else
  return false;
#endif
}

KernelIsa kernel_isa() {
  static const KernelIsa isa = [] {
    const char* forced = std::getenv("K3_KERNELS");
    if (forced != nullptr && std::strcmp(forced, "scalar") == 0) return KernelIsa::kScalar;
    return cpu_supports_avx2() ? KernelIsa::kAvx2 : KernelIsa::kScalar;
  }();
  return isa;
}

std::string_view kernel_isa_name(KernelIsa isa) {
  return isa == KernelIsa::kAvx2 ? "avx2" : "scalar";
}

}  // namespace k3
