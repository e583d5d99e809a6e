#include "shared/base/cpu_features.h"

#include <cstdio>
#include <cstdlib>
#include <string>
#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace k3::base {

namespace {

#if defined(__x86_64__)
// XCR0: the register state the OS saves on context switches.
uint64_t xcr0() {
  unsigned lo, hi;
  __asm__("xgetbv" : "=a"(lo), "=d"(hi) : "c"(0));
  return (static_cast<uint64_t>(hi) << 32) | lo;
}

// AVX2 + FMA + F16C with the OS saving XMM/YMM state (XCR0 bits 1 and 2).
bool cpu_has_avx2() {
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d)) return false;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), f16c = c & (1u << 29);
  if (!fma || !osxsave || !f16c) return false;
  if ((xcr0() & 0x6u) != 0x6u) return false;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  return b & (1u << 5);  // AVX2
}

// AVX-512 F/DQ/BW/VL/VNNI with the OS saving opmask, ZMM0-15 upper halves and
// ZMM16-31 (XCR0 bits 5-7) on top of XMM/YMM (bits 1-2).
bool cpu_has_avx512() {
  if (!cpu_has_avx2()) return false;
  if ((xcr0() & 0xe6u) != 0xe6u) return false;
  unsigned a, b, c, d;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool f = b & (1u << 16), dq = b & (1u << 17), bw = b & (1u << 30), vl = b & (1u << 31);
  const bool vnni = c & (1u << 11);
  return f && dq && bw && vl && vnni;
}
#endif

// Which variants this build compiled (x86_64 with the CMake options on).
#if defined(__x86_64__) && defined(K3_HAVE_AVX2_KERNELS)
constexpr bool kBuiltAvx2 = true;
#else
constexpr bool kBuiltAvx2 = false;
#endif
#if defined(__x86_64__) && defined(K3_HAVE_AVX2_KERNELS) && defined(K3_HAVE_AVX512_KERNELS)
constexpr bool kBuiltAvx512 = true;
#else
constexpr bool kBuiltAvx512 = false;
#endif

struct IsaChoice {
  KernelIsa isa;
  Status status;
};

const IsaChoice& choice() {
  static const IsaChoice c = [] {
    StatusOr<KernelIsa> r = resolve_kernel_isa(std::getenv("K3_KERNELS"));
    if (r.ok()) return IsaChoice{*r, Status()};
    return IsaChoice{*resolve_kernel_isa(nullptr), r.status()};
  }();
  return c;
}

}  // namespace

bool cpu_supports_avx2() {
#if defined(__x86_64__) && defined(K3_HAVE_AVX2_KERNELS)
  static const bool yes = cpu_has_avx2();
  return yes;
#else
  return false;
#endif
}

bool cpu_supports_avx512() {
#if defined(__x86_64__) && defined(K3_HAVE_AVX2_KERNELS) && defined(K3_HAVE_AVX512_KERNELS)
  static const bool yes = cpu_has_avx512();
  return yes;
#else
  return false;
#endif
}

bool kernel_isa_supported(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kScalar:
      return true;
    case KernelIsa::kAvx2:
      return cpu_supports_avx2();
    case KernelIsa::kAvx512:
      return cpu_supports_avx512();
  }
  return false;
}

std::vector<KernelIsa> supported_kernel_isas() {
  std::vector<KernelIsa> out;
  for (KernelIsa isa : {KernelIsa::kScalar, KernelIsa::kAvx2, KernelIsa::kAvx512})
    if (kernel_isa_supported(isa)) out.push_back(isa);
  return out;
}

StatusOr<KernelIsa> resolve_kernel_isa(const char* k3_kernels) {
  if (k3_kernels == nullptr || *k3_kernels == '\0') {
    if (cpu_supports_avx512()) return KernelIsa::kAvx512;
    if (cpu_supports_avx2()) return KernelIsa::kAvx2;
    return KernelIsa::kScalar;
  }
  const std::string v = k3_kernels;
  for (KernelIsa isa : {KernelIsa::kScalar, KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    if (v != kernel_isa_name(isa)) continue;
    if (kernel_isa_supported(isa)) return isa;
    const bool built = isa == KernelIsa::kAvx2 ? kBuiltAvx2 : kBuiltAvx512;
    return absl::InvalidArgumentError(
        cat("K3_KERNELS=", v, ": ",
            built ? "this CPU (or its OS) does not support that kernel variant"
                  : "this build has no such kernel variant (configured without it)"));
  }
  return absl::InvalidArgumentError(
      cat("K3_KERNELS=", v, ": unknown kernel variant (expected scalar, avx2 or avx512)"));
}

KernelIsa kernel_isa() {
  return choice().isa;
}

Status kernel_isa_status() {
  return choice().status;
}

void exit_if_kernel_isa_invalid(std::string_view program) {
  const Status s = kernel_isa_status();
  if (s.ok()) return;
  std::fprintf(stderr, "%.*s: %.*s\n", static_cast<int>(program.size()), program.data(),
               static_cast<int>(s.message().size()), s.message().data());
  std::exit(2);
}

std::string_view kernel_isa_name(KernelIsa isa) {
  switch (isa) {
    case KernelIsa::kScalar:
      return "scalar";
    case KernelIsa::kAvx2:
      return "avx2";
    case KernelIsa::kAvx512:
      return "avx512";
  }
  return "scalar";
}

}  // namespace k3::base
