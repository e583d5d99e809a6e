// K3_KERNELS parsing and the kernel variant choice (shared/base/cpu_features.h),
// against what this CPU and build really support.
#include "shared/base/cpu_features.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <string>

namespace k3 {
namespace {

base::KernelIsa best() {
  return base::cpu_supports_avx512() ? base::KernelIsa::kAvx512
         : base::cpu_supports_avx2() ? base::KernelIsa::kAvx2
                                     : base::KernelIsa::kScalar;
}

TEST(CpuFeatures, UnsetOrEmptyPicksTheBestSupportedVariant) {
  EXPECT_EQ(*base::resolve_kernel_isa(nullptr), best());
  EXPECT_EQ(*base::resolve_kernel_isa(""), best());
  // The process-wide choice honours this test run's environment.
  if (std::getenv("K3_KERNELS") == nullptr) {
    EXPECT_EQ(base::kernel_isa(), best());
  }
  EXPECT_TRUE(base::kernel_isa_supported(base::kernel_isa()));
}

TEST(CpuFeatures, EachNamedVariantIsForcedOrRefused) {
  EXPECT_EQ(*base::resolve_kernel_isa("scalar"), base::KernelIsa::kScalar);
  for (base::KernelIsa isa : {base::KernelIsa::kAvx2, base::KernelIsa::kAvx512}) {
    const std::string name(base::kernel_isa_name(isa));
    const StatusOr<base::KernelIsa> r = base::resolve_kernel_isa(name.c_str());
    if (base::kernel_isa_supported(isa)) {
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
    const StatusOr<base::KernelIsa> r = base::resolve_kernel_isa(v);
    ASSERT_FALSE(r.ok()) << v;
    const std::string msg(r.status().message());
    EXPECT_NE(msg.find(std::string("K3_KERNELS=") + v), std::string::npos) << msg;
    EXPECT_NE(msg.find("unknown"), std::string::npos) << msg;
    EXPECT_NE(msg.find("scalar, avx2 or avx512"), std::string::npos) << msg;
  }
}

TEST(CpuFeatures, SupportedListIsOrderedAndConsistent) {
  const auto isas = base::supported_kernel_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), base::KernelIsa::kScalar);
  EXPECT_EQ(isas.back(), best());
  // AVX-512 support implies AVX2 support (the AVX-512 level reuses AVX2 kernels).
  if (base::cpu_supports_avx512()) {
    EXPECT_TRUE(base::cpu_supports_avx2());
  }
  EXPECT_EQ(isas.size(), 1u + base::cpu_supports_avx2() + base::cpu_supports_avx512());
}

}  // namespace
}  // namespace k3
