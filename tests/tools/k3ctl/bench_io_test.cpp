// k3ctl bench io as a real process on the tiny model: every JSON line
// parses, expertd's figure comes with the raw reads of the same moments
// (one pair per round, interleaved), and frac_of_raw is their ratio.
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "tests/hugetlbfs_mount.h"
#include "tests/test_util.h"
#include "tests/tools/k3ctl/json_lines.h"

namespace k3 {
namespace {

using json = nlohmann::json;

std::vector<json> with(const std::vector<json>& v, const std::string& metric) {
  return testing::with_metric(v, metric);
}

TEST(BenchIo, ComparesExpertdWithTheRawReadsBesideIt) {
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "bench", "io", "--model",
                                 testing::tiny_model_dir(), "--seconds", "0.6", "--rounds", "3",
                                 "--cache-gb", "0.001", "--engine-tokens", "2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> v = testing::json_lines(r.out);
  ASSERT_EQ(with(v, "raw_read_gbps").size(), 1u);
  EXPECT_GT(with(v, "raw_read_gbps")[0]["value"].get<double>(), 0);
  ASSERT_EQ(with(v, "raw_read_gbps_interleaved").size(), 1u);
  const json raw = with(v, "raw_read_gbps_interleaved")[0];
  EXPECT_EQ(raw["rounds"], 3);
  EXPECT_DOUBLE_EQ(raw["window_s"].get<double>(), 0.2);
  ASSERT_EQ(with(v, "expertd_gbps").size(), 1u);
  const json e = with(v, "expertd_gbps")[0];
  ASSERT_EQ(e["rounds"].size(), 3u) << e.dump();
  double raw_sum = 0, read_sum = 0;
  // Which window of a pair goes first alternates (a drifting drive favours
  // neither side).
  EXPECT_EQ(e["rounds"][0]["first"], "raw");
  EXPECT_EQ(e["rounds"][1]["first"], "expertd");
  EXPECT_EQ(e["rounds"][2]["first"], "raw");
  for (const json& p : e["rounds"]) {
    EXPECT_GT(p["raw_gbps"].get<double>(), 0) << p.dump();
    EXPECT_GT(p["expertd_read_gbps"].get<double>(), 0) << "the cache is far below the expert set";
    raw_sum += p["raw_gbps"].get<double>();
    read_sum += p["expertd_read_gbps"].get<double>();
  }
  EXPECT_NEAR(raw["value"].get<double>(), raw_sum / 3, 1e-9 * raw_sum);
  EXPECT_NEAR(e["raw_ceiling_gbps"].get<double>(), raw_sum / 3, 1e-9 * raw_sum);
  EXPECT_NEAR(e["drive_read_gbps"].get<double>(), read_sum / 3, 1e-9 * read_sum);
  EXPECT_NEAR(e["frac_of_raw"].get<double>(), read_sum / raw_sum, 1e-9);
  EXPECT_GT(e["frac_of_raw_median"].get<double>(), 0);
  EXPECT_GT(e["miss_rate"].get<double>(), 0);
  EXPECT_EQ(e["expertd_qd"], 64) << "expertd's default queue depth";
  EXPECT_EQ(e["huge_pages_mixed"], 0) << "/dev/shm is not hugetlbfs";
  ASSERT_EQ(with(v, "engined_decode_expert_gbps").size(), 1u);
  EXPECT_EQ(with(v, "engined_decode_expert_gbps")[0]["tokens"], 2);
}

// --segment-dir: expertd's segment and the raw reads' buffer are files in
// that directory while the bench runs, and both are gone after it.
TEST(BenchIo, PutsBothBuffersInTheSegmentDirectory) {
  // A directory on /dev/shm's tmpfs: shared memory pages io_uring registers.
  const std::string dir = "/dev/shm/k3test-segdir-" + std::to_string(::getpid());
  std::filesystem::create_directory(dir);
  struct RemoveDir {
    std::string dir;
    ~RemoveDir() { std::filesystem::remove_all(dir); }
  } remove_dir{dir};
  std::atomic<bool> seen_both{false};
  std::atomic<bool> done{false};
  std::thread watch([&] {
    while (!done.load()) {
      int expertd = 0, raw = 0;
      for (const auto& f : std::filesystem::directory_iterator(dir)) {
        const std::string n = f.path().filename().string();
        expertd += n.rfind("k3bench-raw-", 0) != 0 && n.rfind("k3bench-", 0) == 0;
        raw += n.rfind("k3bench-raw-", 0) == 0;
      }
      if (expertd == 1 && raw == 1) seen_both = true;
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
  });
  auto r =
      testing::run_command({testing::bin_dir() + "/k3ctl", "bench", "io", "--model",
                            testing::tiny_model_dir(), "--seconds", "0.6", "--rounds", "2",
                            "--cache-gb", "0.001", "--engine-tokens", "1", "--segment-dir", dir});
  done = true;
  watch.join();
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_TRUE(seen_both) << "expertd's segment and the raw buffer in " << dir;
  EXPECT_TRUE(std::filesystem::is_empty(dir)) << "both removed at the end";
  ASSERT_EQ(with(testing::json_lines(r.out), "expertd_gbps").size(), 1u);
}

TEST(BenchIo, RefusesWindowsTooShortToMeasure) {
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "bench", "io", "--model",
                                 testing::tiny_model_dir(), "--seconds", "0.5", "--rounds", "10"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("each window must be at least 0.1 s"), std::string::npos) << r.err;
}

// On hugetlbfs the pages the two buffers take are mixed first: as many as
// they need (the 256 MiB raw buffer, the cache, 64 MiB), bounded by the mount.
TEST(BenchIo, MixesTheHugePagesItWillUse) {
  testing::TempDir tmp;
  testing::HugetlbfsMount huge(tmp.file("huge"), 200);
  if (!huge.skip_reason.empty()) GTEST_SKIP() << huge.skip_reason;
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "bench", "io", "--model",
                                 testing::tiny_model_dir(), "--seconds", "0.6", "--rounds", "2",
                                 "--cache-gb", "0.001", "--engine-tokens", "1", "--segment-dir",
                                 huge.dir()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<json> e = with(testing::json_lines(r.out), "expertd_gbps");
  ASSERT_EQ(e.size(), 1u);
  // (256 MiB + 1 MB + 64 MiB) in 2 MiB pages, rounded up.
  EXPECT_EQ(e[0]["huge_pages_mixed"], 161);
  EXPECT_TRUE(std::filesystem::is_empty(huge.dir())) << "nothing left on the mount";
}

}  // namespace
}  // namespace k3
