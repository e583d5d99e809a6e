// k3ctl refuses to start under an invalid K3_KERNELS (exit 2, the value named
// on stderr) instead of silently running another kernel variant; a valid
// value starts normally. Real k3ctl processes.
#include <gtest/gtest.h>

#include <string>

#include "shared/base/cpu_features.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

testing::CommandResult run_k3ctl(const std::string& kernels, const std::vector<std::string>& args) {
  std::vector<std::string> argv = {"/usr/bin/env", "K3_KERNELS=" + kernels,
                                   testing::bin_dir() + "/k3ctl"};
  argv.insert(argv.end(), args.begin(), args.end());
  return testing::run_command(argv);
}

TEST(K3ctlKernelIsa, UnknownValueIsRefusedAtStart) {
  const auto r = run_k3ctl("avx3", {"bench", "kernels", "--seconds", "0.01"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("K3_KERNELS=avx3"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("unknown kernel variant"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

TEST(K3ctlKernelIsa, UnsupportedVariantIsRefusedOrAccepted) {
  for (base::KernelIsa isa : {base::KernelIsa::kAvx2, base::KernelIsa::kAvx512}) {
    const std::string name(base::kernel_isa_name(isa));
    const auto r = run_k3ctl(name, {"--help"});
    if (base::kernel_isa_supported(isa)) {
      EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    } else {
      EXPECT_EQ(r.exit_code, 2) << name;
      EXPECT_NE(r.err.find("K3_KERNELS=" + name), std::string::npos) << r.err;
    }
  }
  const auto s = run_k3ctl("scalar", {"--help"});
  EXPECT_EQ(s.exit_code, 0) << s.err;
}

// The daemons refuse the same way, before parsing anything.
TEST(K3ctlKernelIsa, EveryDaemonRefusesAnUnknownValue) {
  for (const char* daemon : {"engined", "expertd", "gateway"}) {
    const auto r = testing::run_command(
        {"/usr/bin/env", "K3_KERNELS=sse9", testing::bin_dir() + "/" + daemon, "--help"});
    EXPECT_EQ(r.exit_code, 2) << daemon << ": " << r.err;
    EXPECT_NE(r.err.find("K3_KERNELS=sse9"), std::string::npos) << daemon << ": " << r.err;
  }
}

}  // namespace
}  // namespace k3
