// Which SIMD kernel variant this process runs, decided once at start-up.
//
// K3_KERNELS selects it: unset (or empty) picks the best variant this CPU and
// build support (avx512 > avx2 > scalar); `scalar`, `avx2` or `avx512` forces
// one. An unknown value, or a variant the CPU or the build lacks, is an error:
// kernel_isa_status() reports it, and every main() calls
// exit_if_kernel_isa_invalid() first so such a process refuses to start
// (exit 2, the message on stderr) instead of silently running another variant.
#pragma once

#include <string_view>
#include <vector>

#include "shared/status.h"

namespace k3::base {

enum class KernelIsa { kScalar, kAvx2, kAvx512 };

// The variant in use. When K3_KERNELS is invalid (see kernel_isa_status) this
// is still a variant the CPU can run (the automatic choice), so kernels never
// fault; processes are expected to have refused to start by then.
// Thread-safe; computed on first call.
KernelIsa kernel_isa();
// OK, or InvalidArgument naming the K3_KERNELS value and why it is refused.
Status kernel_isa_status();
// For main(): prints kernel_isa_status()'s message on stderr and exits with
// status 2 when K3_KERNELS is invalid; returns otherwise.
void exit_if_kernel_isa_invalid(std::string_view program);

// The choice for a given K3_KERNELS value (nullptr or "" = automatic),
// against this CPU and build. Exposed for tests.
StatusOr<KernelIsa> resolve_kernel_isa(const char* k3_kernels);

std::string_view kernel_isa_name(KernelIsa isa);
// True when this CPU (and build) can run the AVX2 variant: AVX2, FMA, F16C and
// the OS saving YMM state. Independent of K3_KERNELS.
bool cpu_supports_avx2();
// True when this CPU (and build) can run the AVX-512 variant: AVX2 as above
// plus AVX-512 F/BW/VL/DQ/VNNI and the OS saving opmask and ZMM state (XCR0
// bits 5-7). Independent of K3_KERNELS.
bool cpu_supports_avx512();
// Whether `isa` can run here (CPU and build).
bool kernel_isa_supported(KernelIsa isa);
// Every variant that can run here, scalar first.
std::vector<KernelIsa> supported_kernel_isas();

}  // namespace k3::base
