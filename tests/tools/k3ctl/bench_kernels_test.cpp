// k3ctl bench kernels --gemm-only as a real process: the two compute peaks
// and one gemm_gmacs line per kind, shape and n, each with its rate and its
// fraction of the peak it is compared with (tools/k3ctl/bench_gemm.h).
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <tuple>

#include "tests/test_util.h"
#include "tests/tools/k3ctl/json_lines.h"

namespace k3 {
namespace {

using json = nlohmann::json;

TEST(BenchKernels, GemmOnlyPrintsThePeaksAndEveryGemmLine) {
  const auto r = testing::run_command(
      {testing::bin_dir() + "/k3ctl", "bench", "kernels", "--gemm-only", "--seconds", "0.05"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> v = testing::json_lines(r.out);

  double peak[2] = {};  // int8, f32
  const char* peak_names[2] = {"int8_peak_gmacs", "f32_peak_gmacs"};
  for (int i = 0; i < 2; ++i) {
    const std::vector<json> p = testing::with_metric(v, peak_names[i]);
    ASSERT_EQ(p.size(), 1u) << r.out;
    peak[i] = p[0].at("value").get<double>();
    EXPECT_GT(peak[i], 0) << p[0].dump();
    EXPECT_EQ(p[0].at("unit"), "GMAC/s");
    EXPECT_FALSE(p[0].at("isa").get<std::string>().empty());
    EXPECT_FALSE(p[0].at("instr").get<std::string>().empty());
  }
  // The bandwidth lines are skipped.
  EXPECT_TRUE(testing::with_metric(v, "mem_read_gbps").empty());
  EXPECT_EQ(v.size(), 2u + 16u) << r.out;

  const std::vector<json> g = testing::with_metric(v, "gemm_gmacs");
  ASSERT_EQ(g.size(), 2u * 3 * 2 + 2 * 2) << r.out;
  std::set<std::tuple<std::string, int64_t, int64_t, int64_t>> seen;
  for (const json& j : g) {
    const std::string kind = j.at("kind");
    ASSERT_TRUE(j.at("n").is_number_integer()) << j.dump();
    seen.insert(
        {kind, j.at("rows").get<int64_t>(), j.at("cols").get<int64_t>(), j.at("n").get<int64_t>()});
    const double value = j.at("value").get<double>();
    EXPECT_GT(value, 0) << j.dump();
    EXPECT_EQ(j.at("unit"), "GMAC/s");
    EXPECT_FALSE(j.at("isa").get<std::string>().empty());
    const bool int8 = kind == "mxfp4_i8";
    EXPECT_EQ(j.at("peak_metric"), int8 ? "int8_peak_gmacs" : "f32_peak_gmacs") << j.dump();
    // value and the peak are printed to 0.01, frac_of_peak to 1e-4, each
    // from the unrounded rates.
    const double p = peak[int8 ? 0 : 1], ratio = value / p;
    const double tolerance = 5e-5 + ratio * (0.005 / value + 0.005 / p) + 1e-9;
    EXPECT_NEAR(j.at("frac_of_peak").get<double>(), ratio, tolerance) << j.dump();
  }
  std::set<std::tuple<std::string, int64_t, int64_t, int64_t>> want;
  for (int64_t n : {32, 256}) {
    for (const char* kind : {"dense_int4", "dense_int8"})
      for (const auto& [rows, cols] :
           {std::pair<int64_t, int64_t>{12288, 7168}, {18432, 7168}, {7168, 12288}})
        want.insert({kind, rows, cols, n});
    want.insert({"mxfp4_i8", 3072, 3584, n});
    want.insert({"mxfp4_i8", 3584, 3072, n});
  }
  EXPECT_EQ(seen, want);
}

}  // namespace
}  // namespace k3
