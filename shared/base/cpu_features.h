// Which SIMD kernel variant this process runs, decided once at start-up.
#pragma once

#include <string_view>

namespace k3 {

enum class KernelIsa { kScalar, kAvx2 };

// The variant in use: AVX2 when the CPU has AVX2, FMA and F16C (and the build
// compiled the AVX2 translation units), unless K3_KERNELS=scalar is set.
// Thread-safe; computed on first call.
KernelIsa kernel_isa();
std::string_view kernel_isa_name(KernelIsa isa);
// True when this CPU can run the AVX2 variant (independent of K3_KERNELS).
bool cpu_supports_avx2();

}  // namespace k3
