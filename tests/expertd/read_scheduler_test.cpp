// expertd --read-limit-mbps (a benchmarking aid): drive reads are paced by a
// token bucket, so reading B bytes takes at least about B / limit seconds.
#include <gtest/gtest.h>

#include <chrono>

#include "shared/checkpoint/model_config.h"
#include "tests/expertd/expertd_harness.h"

namespace k3 {
namespace {

using testing::TempDir;
using namespace expertd_test;

TEST(ExpertdReadLimit, ReadsArePacedByTheLimit) {
  TempDir tmp;
  constexpr double kMbps = 1.0;  // MB/s = 10^6 bytes per second
  // 64 KiB chunks: the bucket holds at most that much (or 10 ms of reads).
  Expertd e(tmp, unique_segment("rlimit"), {"--read-limit-mbps", "1", "--read-chunk-kb", "64"});
  ASSERT_TRUE(e.wait_ready()) << testing::read_file(e.log);
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  const auto ids = prompt(12, static_cast<int32_t>(c->vocab_size));
  const auto want = score_standalone(ids);
  const auto t0 = std::chrono::steady_clock::now();
  Status st;
  const auto got = score({e.segment}, ids, &st);
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(got, want);
  const auto s = e.stats();
  ASSERT_GT(s.bytes_read(), 0u);
  // The bucket holds at most one chunk or 10 ms of reads: all but that much
  // waited for the limit.
  const double floor_s = (static_cast<double>(s.bytes_read()) - 65536.0) / (kMbps * 1e6);
  EXPECT_GE(secs, floor_s) << s.bytes_read() << " bytes";
  EXPECT_GT(s.read_limit_waits(), 0u);
  EXPECT_GT(s.read_limit_wait_seconds(), 0.0);
  std::fprintf(stderr, "read %llu bytes in %.2f s (limit %.1f MB/s)\n",
               static_cast<unsigned long long>(s.bytes_read()), secs, kMbps);
}

TEST(ExpertdReadLimit, ANegativeLimitIsRefused) {
  TempDir tmp;
  auto r =
      testing::run_command({testing::bin_dir() + "/expertd", "--model", testing::tiny_model_dir(),
                            "--read-limit-mbps", "-1", "--listen", "unix:" + tmp.file("x.sock")});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--read-limit-mbps"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace k3
