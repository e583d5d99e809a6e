// Issue 29 item 5, with real processes: an engined of one checkpoint never
// computes on the experts of another checkpoint of the same config (two
// mkmodel seeds: config.json and the tensor table identical), whether they come
// from a local segment, a drive laid out by k3ctl place, or a remote host. Each
// is refused with both fingerprints named; the same snapshot is accepted.
#include <gtest/gtest.h>

#include <filesystem>

#include "shared/base/hash.h"
#include "shared/checkpoint/checkpoint.h"
#include "tests/expertd/remote_harness.h"
#include "tools/mkmodel/mkmodel.h"

namespace k3 {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using namespace expertd_test;

// The tiny model of seed 2 (the tiny model is seed 1), written into `tmp`.
std::string other_seed(const TempDir& tmp) {
  tools::MkModelOptions o;
  o.out_dir = tmp.file("seed2");
  o.seed = 2;
  o.progress = false;
  auto r = tools::make_model(o);
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(testing::read_file(o.out_dir + "/config.json"),
            testing::read_file(testing::tiny_model_dir() + "/config.json"));
  return o.out_dir;
}

std::string fingerprint_of(const std::string& dir) {
  auto ck = checkpoint::Checkpoint::open(dir, {}, checkpoint::ShardPolicy::kPresent);
  EXPECT_TRUE(ck.ok()) << ck.status();
  return ck.ok() ? base::hex64((*ck)->fingerprint()) : "";
}

testing::CommandResult generate(const std::vector<std::string>& experts_flags) {
  std::vector<std::string> argv = {testing::bin_dir() + "/engined",
                                   "generate",
                                   "--model",
                                   testing::tiny_model_dir(),
                                   "--ids",
                                   "5,6,7",
                                   "--max-tokens",
                                   "2",
                                   "--log-level",
                                   "warn"};
  argv.insert(argv.end(), experts_flags.begin(), experts_flags.end());
  return testing::run_command(argv);
}

// The local segment: expertd on seed 2's snapshot, and on a drive placed from
// it; engined of seed 1 exits 1 naming the segment and both fingerprints,
// and nothing is read for it.
TEST(ExpertdModelIdentity, EnginedRefusesTheSegmentOfAnotherSeed) {
  TempDir tmp;
  const std::string other = other_seed(tmp);
  if (HasFailure()) return;
  const std::string mine = fingerprint_of(testing::tiny_model_dir());
  const std::string theirs = fingerprint_of(other);
  ASSERT_NE(mine, theirs);

  const std::string drive = tmp.file("nvme0");
  fs::create_directory(drive);
  auto placed = testing::run_command(
      {testing::bin_dir() + "/k3ctl", "place", "--model", other, "--drives", drive, "--apply"});
  ASSERT_EQ(placed.exit_code, 0) << placed.err;
  EXPECT_EQ(fingerprint_of(drive), theirs) << "the drive carries its source's identity";

  for (const std::string& model : {other, drive}) {
    Expertd e(tmp, unique_segment("seed2"), {}, model);
    ASSERT_TRUE(e.wait_ready()) << testing::read_file(e.log);
    auto r = generate({"--expertd", e.segment});
    EXPECT_EQ(r.exit_code, 1) << model << "\n" << r.out << r.err;
    EXPECT_CONTAINS(r.err, e.segment);
    EXPECT_CONTAINS(r.err, "serves another model (fingerprint mismatch: " + theirs +
                               ", this engine's is " + mine + "): refused");
    EXPECT_EQ(e.stats().reads(), 0u) << model;
  }

  // The same snapshot's drive is accepted.
  const std::string own = tmp.file("nvme1");
  fs::create_directory(own);
  placed = testing::run_command({testing::bin_dir() + "/k3ctl", "place", "--model",
                                 testing::tiny_model_dir(), "--drives", own, "--apply"});
  ASSERT_EQ(placed.exit_code, 0) << placed.err;
  Expertd e(tmp, unique_segment("seed1"), {}, own);
  ASSERT_TRUE(e.wait_ready()) << testing::read_file(e.log);
  auto r = generate({"--expertd", e.segment});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_GT(e.stats().reads(), 0u);
}

// A remote host of seed 2: Describe's fingerprint differs, engined exits 1
// naming the host and both fingerprints; no request reaches the host.
TEST(ExpertdModelIdentity, EnginedRefusesARemoteHostOfAnotherSeed) {
  TempDir tmp;
  const std::string other = other_seed(tmp);
  if (HasFailure()) return;
  const std::string mine = fingerprint_of(testing::tiny_model_dir());
  const std::string theirs = fingerprint_of(other);
  RemoteExpertd h(tmp, "rseed2", {"--insecure-remote"}, other);
  ASSERT_TRUE(h.wait_ready()) << h.log();
  EXPECT_EQ(h.describe().model_fingerprint(), theirs);
  auto r = generate(
      {"--remote-expertd", "s2=" + h.address, "--insecure-remote", "--remote-deadline-ms", "3000"});
  EXPECT_EQ(r.exit_code, 1) << r.out << r.err;
  EXPECT_CONTAINS(r.err, "remote expertd s2 (" + h.address +
                             ") serves another model (fingerprint " + theirs +
                             ", this engine's is " + mine + "): refused");
  EXPECT_EQ(h.stats().remote_requests(), 0u);
}

}  // namespace
}  // namespace k3
