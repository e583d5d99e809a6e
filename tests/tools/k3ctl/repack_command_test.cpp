// `k3ctl repack` as a real process on the tiny model: the source untouched,
// resume after kill -9 in the middle of a shard, disjoint --shards ranges into
// one destination, --verify, duplicates refused, progress with ETA, and the
// container read by `k3ctl inspect` and `engined score`.
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>

#include "tests/test_util.h"

namespace k3 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::TempDir;

std::string k3ctl() {
  return testing::bin_dir() + "/k3ctl";
}

// Every file of a directory (name -> FNV hash), leaving out the lock file.
std::map<std::string, uint64_t> hashes(const std::string& dir) {
  std::map<std::string, uint64_t> h;
  for (const auto& e : fs::directory_iterator(dir)) {
    const std::string n = e.path().filename();
    if (n != ".k3repack.lock") h[n] = testing::hash_file(e.path());
  }
  return h;
}

testing::CommandResult run_repack(const std::vector<std::string>& extra) {
  std::vector<std::string> argv = {k3ctl(), "repack", "--model", testing::tiny_model_dir()};
  argv.insert(argv.end(), extra.begin(), extra.end());
  return testing::run_command(argv);
}

struct Reference {
  TempDir tmp;
  std::string dir;
  json summary;
};

// One uninterrupted repack at the default bits, to compare the others with.
const Reference& reference() {
  static Reference* r = [] {
    auto* ref = new Reference;
    ref->dir = ref->tmp.file("ref");
    auto res = run_repack({"--out", ref->dir, "--verify"});
    EXPECT_EQ(res.exit_code, 0) << res.err;
    ref->summary = json::parse(res.out);
    return ref;
  }();
  return *r;
}

TEST(Repack, WritesAVerifiedContainerAndNeverTouchesTheSource) {
  const std::string& src = testing::tiny_model_dir();
  const auto before = testing::dir_snapshot(src);
  const auto src_hashes = hashes(src);
  const Reference& ref = reference();
  const json& j = ref.summary;
  EXPECT_EQ(j["shards"], 6);  // dense + 5 MoE layers
  EXPECT_EQ(j["shards_written"], 6);
  EXPECT_EQ(j["shards_complete"], 6);
  EXPECT_EQ(j["experts_verified"], 5 * 32);
  EXPECT_LE(j["container_bytes"].get<double>(), 1.05 * j["implied_bytes"].get<double>());
  EXPECT_EQ(testing::dir_snapshot(src), before);
  EXPECT_EQ(hashes(src), src_hashes);
  // No temporary left behind; config.json byte-identical.
  for (const auto& [name, h] : hashes(ref.dir)) EXPECT_EQ(name.find(".partial"), std::string::npos);
  EXPECT_EQ(testing::read_file(ref.dir + "/config.json"), testing::read_file(src + "/config.json"));

  auto r = testing::run_command({k3ctl(), "inspect", "--strict", "--model", ref.dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json in = json::parse(r.out);
  const json src_in = json::parse(testing::run_command({k3ctl(), "inspect", "--model", src}).out);
  EXPECT_EQ(in["fingerprint"], src_in["fingerprint"]);
  EXPECT_EQ(in["experts_contiguous"], 5 * 32);
  EXPECT_EQ(in["unused_tensors"], 0);
  EXPECT_EQ(in["container"]["dense_bits"], 4);

  // engined reads it at the container's bits without being told.
  TempDir tmp;
  r = testing::run_command({testing::bin_dir() + "/engined", "score", "--model", ref.dir, "--ids",
                            "1,2,3", "--out", tmp.file("c.bin")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = testing::run_command({testing::bin_dir() + "/engined", "score", "--model", src, "--ids",
                            "1,2,3", "--out", tmp.file("s.bin")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::read_file(tmp.file("c.bin")), testing::read_file(tmp.file("s.bin")));
  r = testing::run_command({testing::bin_dir() + "/engined", "score", "--model", ref.dir,
                            "--dense-bits", "8", "--ids", "1,2,3", "--out", tmp.file("x.bin")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is stored at 4 bits in this container, 8 were asked for (--dense-bits)"),
            std::string::npos)
      << r.err;
}

TEST(Repack, ResumesAfterKillNineInTheMiddleOfAShard) {
  const std::string& src = testing::tiny_model_dir();
  const auto src_hashes = hashes(src);
  TempDir tmp;
  const std::string out = tmp.file("c");
  // The dense shard done, the first expert shard half written.
  {
    const std::string& ref = reference().dir;
    const uint64_t stall = fs::file_size(ref + "/model-00001-of-00006.safetensors") +
                           fs::file_size(ref + "/model-00002-of-00006.safetensors") / 2;
    ::setenv("K3CTL_REPACK_STALL_AFTER_BYTES", std::to_string(stall).c_str(), 1);
    testing::Process p({k3ctl(), "repack", "--model", src, "--out", out}, tmp.file("err.txt"));
    ::unsetenv("K3CTL_REPACK_STALL_AFTER_BYTES");
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (testing::read_file(tmp.file("err.txt")).find("stalled at") == std::string::npos &&
           std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_NE(testing::read_file(tmp.file("err.txt")).find("stalled at"), std::string::npos);
    EXPECT_EQ(p.stop(SIGKILL), 128 + SIGKILL);
  }
  bool partial = false;
  int64_t complete = 0;
  for (const auto& [name, h] : hashes(out)) {
    partial |= name.find(".partial") != std::string::npos;
    complete += name.size() > 12 && name.substr(name.size() - 12) == ".safetensors";
  }
  EXPECT_TRUE(partial);
  EXPECT_GE(complete, 1);
  EXPECT_LT(complete, 6);

  auto r = testing::run_command({k3ctl(), "repack", "--model", src, "--out", out, "--verify"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["shards_kept"], complete);
  EXPECT_EQ(j["shards_written"], 6 - complete);
  EXPECT_EQ(j["experts_verified"], 5 * 32);
  EXPECT_NE(r.err.find("ETA"), std::string::npos) << r.err;
  // The same bytes as the uninterrupted run; the source untouched.
  EXPECT_EQ(hashes(out), hashes(reference().dir));
  EXPECT_EQ(hashes(src), src_hashes);
}

TEST(Repack, DisjointShardRangesInParallelBuildOneContainer) {
  TempDir tmp;
  const std::string out = tmp.file("c");
  const std::string& src = testing::tiny_model_dir();
  testing::Process a({k3ctl(), "repack", "--model", src, "--out", out, "--shards", "1-3"});
  testing::Process b({k3ctl(), "repack", "--model", src, "--out", out, "--shards", "4-6"});
  EXPECT_EQ(a.wait_exit(120), 0);
  EXPECT_EQ(b.wait_exit(120), 0);
  EXPECT_EQ(hashes(out), hashes(reference().dir));

  // A partial range leaves an index of what is complete.
  const std::string part = tmp.file("p");
  auto r = run_repack({"--out", part, "--shards", "2-2"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["shards_complete"], 1);
  const json idx = json::parse(testing::read_file(part + "/model.safetensors.index.json"));
  for (const auto& [name, file] : idx["weight_map"].items())
    EXPECT_EQ(file, "model-00002-of-00006.safetensors") << name;

  // A shard file holding another shard's tensors: the index refuses duplicates.
  fs::copy_file(part + "/model-00002-of-00006.safetensors",
                part + "/model-00003-of-00006.safetensors");
  r = run_repack({"--out", part, "--shards", "1-1"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is in both model-00002-of-00006.safetensors and "
                       "model-00003-of-00006.safetensors; refusing to index duplicates"),
            std::string::npos)
      << r.err;
  // ... and refuses to keep it as shard 3.
  r = run_repack({"--out", part, "--shards", "3-3"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("model-00003-of-00006.safetensors exists but does not hold what this "
                       "repack writes there"),
            std::string::npos)
      << r.err;
}

TEST(Repack, DenseOnlyAndBadRequests) {
  TempDir tmp;
  auto r = run_repack({"--out", tmp.file("d"), "--dense-only", "--bits", "8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["shards"], 1);
  EXPECT_LT(j["container_bytes"].get<uint64_t>(), j["source_bytes"].get<uint64_t>() / 2);
  r = testing::run_command({k3ctl(), "inspect", "--strict", "--model", tmp.file("d")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["container"]["dense_only"], true);

  // Other settings into the same destination.
  r = run_repack({"--out", tmp.file("d"), "--dense-only", "--bits", "4"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("holds a repack with other settings"), std::string::npos) << r.err;
  r = run_repack({"--out", tmp.file("e"), "--shards", "7-9"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("this container has output shards 1-6"), std::string::npos) << r.err;
  r = run_repack({"--out", tmp.file("e"), "--shards", "3-x"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--shards '3-x': expected A-B"), std::string::npos) << r.err;
  r = run_repack({"--out", testing::tiny_model_dir()});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--out must not be the source directory"), std::string::npos) << r.err;
  r = testing::run_command({k3ctl(), "repack", "--model", reference().dir, "--out", tmp.file("f")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is itself a container"), std::string::npos) << r.err;
}

// k3ctl bench start: a line per configuration and page-cache state, then the
// sizes and ratios.
TEST(BenchStart, PrintsTimeToReadyAndMemoryOfEveryConfiguration) {
  auto r = testing::run_command({k3ctl(), "bench", "start", "--model", testing::tiny_model_dir(),
                                 "--container", reference().dir});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  std::set<std::string> seen;
  json summary;
  std::istringstream lines(r.out);
  std::string line;
  while (std::getline(lines, line)) {
    const json j = json::parse(line);
    EXPECT_EQ(j["bench"], "start");
    if (j.contains("config")) {
      seen.insert(j["config"].get<std::string>() + "/" + j["cache"].get<std::string>());
      EXPECT_GT(j["ready_seconds"].get<double>(), 0);
      EXPECT_GT(j["peak_rss_anon_mb"].get<double>(), 0);
      EXPECT_GT(j["peak_rss_file_mb"].get<double>(), 0);
    } else if (j.contains("source_bytes")) {
      summary = j;
    }
  }
  const bool root = ::geteuid() == 0;
  for (const char* c : {"source_4bit", "source_8bit", "container", "container_mmap"}) {
    EXPECT_TRUE(seen.count(std::string(c) + "/warm")) << c;
    EXPECT_EQ(seen.count(std::string(c) + "/cold"), root ? 1u : 0u) << c;
  }
  if (!root) EXPECT_NE(r.out.find("warm page cache only"), std::string::npos);
  ASSERT_TRUE(summary.contains("container_vs_source")) << r.out;
  EXPECT_LT(summary["container_vs_source"].get<double>(), 1.0);
  EXPECT_TRUE(summary.contains("ready_mmap_vs_source_warm"));
}

// expertd serves a container's experts unchanged: engined taking them from
// an expertd on the container scores what it scores from the source.
TEST(Repack, ExpertdServesTheContainersExperts) {
  TempDir tmp;
  const std::string addr = "unix:" + tmp.file("expertd.sock");
  const std::string segment = "k3test-repack-" + std::to_string(::getpid());
  testing::Process expertd({testing::bin_dir() + "/expertd", "--model", reference().dir, "--listen",
                            addr, "--cache-gb", "0.05", "--segment", segment},
                           tmp.file("expertd.log"));
  bool up = false;
  for (int i = 0; i < 300 && !up; ++i) {
    up = testing::run_command({k3ctl(), "health", "--address", addr, "--service", "expertd"})
             .exit_code == 0;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(up) << testing::read_file(tmp.file("expertd.log"));
  const std::string engined = testing::bin_dir() + "/engined";
  auto r = testing::run_command({engined, "score", "--model", reference().dir, "--expertd", segment,
                                 "--ids", "5,6,7,8", "--out", tmp.file("c.bin")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = testing::run_command({engined, "score", "--model", testing::tiny_model_dir(), "--ids",
                            "5,6,7,8", "--out", tmp.file("s.bin")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::read_file(tmp.file("c.bin")), testing::read_file(tmp.file("s.bin")));
  EXPECT_EQ(expertd.stop(SIGTERM), 0);
}

// A tensor the model does not use: k3ctl inspect and engined warn, and fail
// with --strict; the vision tower is left out of the report.
TEST(Repack, StrictRefusesUnusedTensors) {
  TempDir tmp;
  const std::string m = tmp.file("m");
  fs::copy(reference().dir, m);
  {
    // An extra shard holding one stray tensor and one of the vision tower.
    std::string header =
        R"({"language_model.model.stray.weight":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
        R"("vision_tower.patch.weight":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})";
    while (header.size() % 8) header.push_back(' ');
    std::string file(8, '\0');
    const uint64_t n = header.size();
    std::memcpy(file.data(), &n, 8);
    file += header + std::string(16, '\0');
    testing::write_file(m + "/extra.safetensors", file);
    json idx = json::parse(testing::read_file(m + "/model.safetensors.index.json"));
    idx["weight_map"]["language_model.model.stray.weight"] = "extra.safetensors";
    idx["weight_map"]["vision_tower.patch.weight"] = "extra.safetensors";
    testing::write_file(m + "/model.safetensors.index.json", idx.dump());
  }
  auto r = testing::run_command({k3ctl(), "inspect", "--model", m});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["unused_tensors"], 1);
  EXPECT_NE(r.err.find("tensor 'language_model.model.stray.weight' is not used by the model"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("vision_tower"), std::string::npos) << r.err;
  r = testing::run_command({k3ctl(), "inspect", "--strict", "--model", m});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("1 tensor(s) the model does not use (--strict)"), std::string::npos)
      << r.err;
  const std::string engined = testing::bin_dir() + "/engined";
  r = testing::run_command(
      {engined, "score", "--model", m, "--ids", "1,2", "--out", tmp.file("a.bin")});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("1 tensor(s) the model does not use: language_model.model.stray.weight"),
            std::string::npos)
      << r.err;
  r = testing::run_command(
      {engined, "score", "--strict", "--model", m, "--ids", "1,2", "--out", tmp.file("b.bin")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("language_model.model.stray.weight (--strict)"), std::string::npos) << r.err;
}

// Issue 24: a source without its vision shards repacks (with a warning;
// refused under --strict) into a container engined serves, with the same
// warning from engined on the source; a missing text shard fails naming it.
TEST(Repack, SourceWithoutItsVisionShards) {
  TempDir tmp;
  const std::string model = tmp.file("model");
  fs::copy(testing::tiny_model_dir(), model, fs::copy_options::recursive);
  const std::string projector = "model-00004-of-00005.safetensors";
  fs::remove(model + "/" + projector);
  auto r = testing::run_command({k3ctl(), "repack", "--model", model, "--out", tmp.file("c")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["missing_shards"], 1);
  EXPECT_EQ(json::parse(r.out)["dropped_tensors"], 5) << "the tower's, still on disk";
  EXPECT_CONTAINS(r.err, "k3ctl repack: warning: shard " + projector +
                             " named by the index is missing; its 3 tensor(s) are not used by "
                             "the model (mm_projector.");
  EXPECT_EQ(hashes(tmp.file("c")), hashes(reference().dir)) << "the same container";
  r = testing::run_command(
      {k3ctl(), "repack", "--model", model, "--out", tmp.file("s"), "--strict"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.err,
                  "(" + projector + "); they hold only tensors the model does not use (--strict)");
  EXPECT_FALSE(fs::exists(tmp.file("s")));

  const std::string engined = testing::bin_dir() + "/engined";
  r = testing::run_command(
      {engined, "score", "--model", model, "--ids", "1,2,3", "--out", tmp.file("a.bin")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.err, "shard " + projector + " named by the index is missing; its 3 tensor(s)");
  r = testing::run_command({engined, "score", "--model", testing::tiny_model_dir(), "--ids",
                            "1,2,3", "--out", tmp.file("b.bin")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(testing::read_file(tmp.file("a.bin")), testing::read_file(tmp.file("b.bin")));
  r = testing::run_command({engined, "score", "--strict", "--model", model, "--ids", "1,2,3",
                            "--out", tmp.file("x.bin")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.err, "(--strict)");

  const std::string text = "model-00001-of-00005.safetensors";
  fs::remove(model + "/" + text);
  r = testing::run_command({k3ctl(), "repack", "--model", model, "--out", tmp.file("t")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.err, "shard " + text + " named by the index is missing from " + model +
                             "; it holds tensor 'language_model.model.");
}

}  // namespace
}  // namespace k3
