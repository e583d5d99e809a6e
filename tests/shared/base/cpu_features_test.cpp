// K3_KERNELS parsing and the kernel variant choice (shared/base/cpu_features.h),
// against what this CPU and build really support.
#include "shared/base/cpu_features.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace k3 {
namespace {

KernelIsa best() {
  return cpu_supports_avx512() ? KernelIsa::kAvx512
         : cpu_supports_avx2() ? KernelIsa::kAvx2
                               : KernelIsa::kScalar;
}

TEST(CpuFeatures, UnsetOrEmptyPicksTheBestSupportedVariant) {
  EXPECT_EQ(*resolve_kernel_isa(nullptr), best());
  EXPECT_EQ(*resolve_kernel_isa(""), best());
  // The process-wide choice honours this test run's environment.
  if (std::getenv("K3_KERNELS") == nullptr) {
    EXPECT_EQ(kernel_isa(), best());
  }
  EXPECT_TRUE(kernel_isa_supported(kernel_isa()));
}

TEST(CpuFeatures, EachNamedVariantIsForcedOrRefused) {
  EXPECT_EQ(*resolve_kernel_isa("scalar"), KernelIsa::kScalar);
  for (KernelIsa isa : {KernelIsa::kAvx2, KernelIsa::kAvx512}) {
    const std::string name(kernel_isa_name(isa));
    const StatusOr<KernelIsa> r = resolve_kernel_isa(name.c_str());
    if (kernel_isa_supported(isa)) {
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_EQ(*r, isa);
    } else {
      ASSERT_FALSE(r.ok()) << name;
      EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_NE(std::string(r.status().message()).find("K3_KERNELS=" + name), std::string::npos)
          << r.status();
    }
  }
}

TEST(CpuFeatures, UnknownValuesAreRefusedNamingTheValue) {
  for (const char* v : {"avx", "AVX2", "avx-512", "scalar ", "sse4", "auto"}) {
    const StatusOr<KernelIsa> r = resolve_kernel_isa(v);
    ASSERT_FALSE(r.ok()) << v;
    const std::string msg(r.status().message());
    EXPECT_NE(msg.find(std::string("K3_KERNELS=") + v), std::string::npos) << msg;
    EXPECT_NE(msg.find("unknown"), std::string::npos) << msg;
    EXPECT_NE(msg.find("scalar, avx2 or avx512"), std::string::npos) << msg;
  }
}

TEST(CpuFeatures, SupportedListIsOrderedAndConsistent) {
  const auto isas = supported_kernel_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), KernelIsa::kScalar);
  EXPECT_EQ(isas.back(), best());
  // AVX-512 support implies AVX2 support (the AVX-512 level reuses AVX2 kernels).
  if (cpu_supports_avx512()) {
    EXPECT_TRUE(cpu_supports_avx2());
  }
  EXPECT_EQ(isas.size(), 1u + cpu_supports_avx2() + cpu_supports_avx512());
}

}  // namespace
}  // namespace k3
