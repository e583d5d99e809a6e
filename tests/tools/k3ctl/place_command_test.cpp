// k3ctl place as a real process on copies of the tiny model: the plan, the
// drives' files (byte-identical experts, one contiguous span each, an index
// per drive), resuming after kill -9, and never writing to the source.
#include <signal.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/model_tensors.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::TempDir;

std::string k3ctl() {
  return testing::bin_dir() + "/k3ctl";
}

std::vector<std::string> make_drives(const TempDir& tmp, const std::string& stem, int n) {
  std::vector<std::string> d;
  for (int i = 0; i < n; ++i) {
    d.push_back(tmp.file(stem + std::to_string(i)));
    fs::create_directory(d.back());
  }
  return d;
}

std::string joined(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += (s.empty() ? "" : ",") + x;
  return s;
}

std::vector<uint8_t> bytes_of(const checkpoint::Checkpoint& ck, const std::string& name) {
  const checkpoint::TensorInfo* t = ck.find(name);
  if (t == nullptr) return {};
  std::vector<uint8_t> b(t->nbytes);
  EXPECT_TRUE(ck.read_bytes(*t, 0, t->nbytes, b.data()).ok());
  return b;
}

TEST(Place, AppliedDrivesHoldByteIdenticalExpertsAndTheSourceIsUntouched) {
  TempDir tmp;
  const std::string model = testing::tiny_model_dir();
  const auto before = testing::dir_snapshot(model);
  const auto drives = make_drives(tmp, "nvme", 3);
  auto r = testing::run_command({k3ctl(), "place", "--model", model, "--drives", joined(drives),
                                 "--replicas", "2", "--apply", "--file-gb", "0.001"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  EXPECT_EQ(out["files_already_complete"], 0);
  EXPECT_EQ(testing::dir_snapshot(model), before);

  auto c = checkpoint::load_model_config(model);
  auto src = checkpoint::Checkpoint::open(model);
  ASSERT_TRUE(src.ok());
  std::map<std::pair<int64_t, int64_t>, int> copies;
  for (const std::string& d : drives) {
    // Each drive is a self-contained directory: config, index, its files.
    EXPECT_EQ(testing::read_file(d + "/config.json"), testing::read_file(model + "/config.json"));
    auto ck = checkpoint::Checkpoint::open(d);
    ASSERT_TRUE(ck.ok()) << ck.status();
    EXPECT_GT((*ck)->files().size(), 1u);  // --file-gb 0.001 splits it
    EXPECT_EQ((*ck)->fingerprint(), (*src)->fingerprint());
    for (int64_t l = c->first_k_dense_replace; l < c->num_hidden_layers; ++l) {
      for (int64_t e = 0; e < c->num_experts; ++e) {
        const auto six = checkpoint::expert_tensors(*c, l, e);
        if ((*ck)->find(six[0].name) == nullptr) continue;
        ++copies[{l, e}];
        // Contiguous in storage order, one span per expert, same bytes.
        const checkpoint::TensorInfo* first = (*ck)->find(six[0].name);
        uint64_t off = first->offset;
        for (const checkpoint::ExpectedTensor& t : six) {
          const checkpoint::TensorInfo* ti = (*ck)->find(t.name);
          ASSERT_NE(ti, nullptr) << t.name;
          EXPECT_EQ(ti->file, first->file);
          EXPECT_EQ(ti->offset, off) << t.name;
          off += ti->nbytes;
          ASSERT_EQ(bytes_of(**ck, t.name), bytes_of(**src, t.name)) << t.name;
        }
      }
    }
    // No dense tensor on an expert drive.
    EXPECT_EQ((*ck)->find("model.norm.weight"), nullptr);
  }
  ASSERT_EQ(copies.size(), static_cast<size_t>(c->num_moe_layers() * c->num_experts));
  for (const auto& [k, n] : copies) EXPECT_EQ(n, 2);

  // Running it again finds everything in place and writes nothing.
  const auto snap = testing::dir_snapshot(drives[1]);
  r = testing::run_command({k3ctl(), "place", "--model", model, "--drives", joined(drives),
                            "--replicas", "2", "--apply", "--file-gb", "0.001"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["written_bytes"], 0);
  EXPECT_EQ(json::parse(r.out)["drives"][1]["bytes_in_place"],
            json::parse(r.out)["drives"][1]["bytes"]);
  // The expert files were not rewritten (same size and mtime); config and
  // index are rewritten atomically with the same bytes.
  const auto snap2 = testing::dir_snapshot(drives[1]);
  size_t files = 0;
  for (const auto& line : snap)
    if (line.find(".safetensors ") != std::string::npos) {
      ++files;
      EXPECT_NE(std::find(snap2.begin(), snap2.end(), line), snap2.end()) << line;
    }
  EXPECT_GT(files, 1u);
}

TEST(Place, AKilledApplyResumesAndEndsByteIdentical) {
  TempDir tmp;
  const std::string model = testing::tiny_model_dir();
  const auto clean = make_drives(tmp, "clean", 2);
  ASSERT_EQ(testing::run_command({k3ctl(), "place", "--model", model, "--drives", joined(clean),
                                  "--apply", "--file-gb", "0.002"})
                .exit_code,
            0);
  // 8.4 MB of experts at 3 MB/s: kill -9 while a file is half written.
  const auto drives = make_drives(tmp, "nvme", 2);
  {
    testing::Process p({k3ctl(), "place", "--model", model, "--drives", joined(drives), "--apply",
                        "--file-gb", "0.002", "--limit-mbps", "3"},
                       tmp.file("place.err"));
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    bool torn = false;
    while (!torn && std::chrono::steady_clock::now() < deadline) {
      for (const auto& e : fs::directory_iterator(drives[0]))
        if (e.path().extension() == ".partial" && fs::file_size(e.path()) > 700000 &&
            fs::exists(drives[0] + "/experts-d00-00001-of-00003.safetensors"))
          torn = true;
      if (!torn) std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    ASSERT_TRUE(torn) << testing::read_file(tmp.file("place.err"));
    EXPECT_EQ(p.stop(SIGKILL), 128 + SIGKILL);
  }
  EXPECT_FALSE(fs::exists(drives[0] + "/model.safetensors.index.json"));
  auto r = testing::run_command({k3ctl(), "place", "--model", model, "--drives", joined(drives),
                                 "--apply", "--file-gb", "0.002"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  EXPECT_GT(out["resumed_bytes"].get<uint64_t>(), 0u);
  EXPECT_EQ(out["files_already_complete"], 1);
  for (size_t d = 0; d < drives.size(); ++d) {
    std::vector<std::string> a, b;
    for (const auto& e : fs::directory_iterator(clean[d])) a.push_back(e.path().filename());
    for (const auto& e : fs::directory_iterator(drives[d])) b.push_back(e.path().filename());
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    ASSERT_EQ(a, b);
    for (const std::string& f : a)
      EXPECT_EQ(testing::hash_file(clean[d] + "/" + f), testing::hash_file(drives[d] + "/" + f))
          << f;
  }
}

TEST(Place, RefusalsNameTheProblem) {
  TempDir tmp;
  const std::string model = testing::tiny_model_dir();
  const auto drives = make_drives(tmp, "nvme", 3);
  auto r = testing::run_command(
      {k3ctl(), "place", "--model", model, "--drives", drives[0] + "," + model, "--apply"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is a directory of the source model"), std::string::npos) << r.err;
  r = testing::run_command(
      {k3ctl(), "place", "--model", model, "--drives", joined(drives), "--replicas", "4"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--replicas 4 must be between 1 and the 3 drives"), std::string::npos);
  r = testing::run_command(
      {k3ctl(), "place", "--model", model, "--drives", drives[0] + "," + drives[0]});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("twice"), std::string::npos);
  r = testing::run_command({k3ctl(), "place", "--model", model, "--drives",
                            drives[0] + "," + tmp.file("absent"), "--apply"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is not a directory (mount it first)"), std::string::npos) << r.err;
  // Without --apply the plan says the drive does not exist, and nothing is written.
  r = testing::run_command(
      {k3ctl(), "place", "--model", model, "--drives", drives[0] + "," + tmp.file("absent")});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["drives"][1]["exists"], false);
  EXPECT_TRUE(fs::is_empty(drives[0]));
  // A foreign file where the plan writes one.
  testing::write_file(drives[1] + "/experts-d01-00001-of-00001.safetensors", "not mine");
  r = testing::run_command(
      {k3ctl(), "place", "--model", model, "--drives", joined(drives), "--apply"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("exists and is not the file this plan writes"), std::string::npos) << r.err;
  EXPECT_EQ(testing::read_file(drives[1] + "/experts-d01-00001-of-00001.safetensors"), "not mine");
}

// Issue 29: every file placed carries its source's fingerprint, so a drive
// opens as its model (its experts alone, no embedding to sample). Placing
// another checkpoint of the same config (another mkmodel seed) onto it is
// refused rather than keeping the first one's complete files; a drive holding
// files of both (as that resume did before) is refused at open, naming one.
TEST(Place, DrivesKeepTheirModelsIdentity) {
  TempDir tmp;
  const std::string model = testing::tiny_model_dir();
  const std::string other = tmp.file("seed2");
  auto r =
      testing::run_command({k3ctl(), "mkmodel", "--preset", "tiny", "--seed", "2", "--out", other});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto fp = [](const std::string& dir) {
    auto ck = checkpoint::Checkpoint::open(dir, {}, checkpoint::ShardPolicy::kPresent);
    EXPECT_TRUE(ck.ok()) << ck.status();
    return ck.ok() ? (*ck)->fingerprint() : 0;
  };
  ASSERT_NE(fp(model), fp(other));
  const auto mine = make_drives(tmp, "mine", 2);
  const auto theirs = make_drives(tmp, "theirs", 2);
  r = testing::run_command({k3ctl(), "place", "--model", model, "--drives", joined(mine),
                            "--file-gb", "0.001", "--apply"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  r = testing::run_command({k3ctl(), "place", "--model", other, "--drives", joined(theirs),
                            "--file-gb", "0.001", "--apply"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  for (int d = 0; d < 2; ++d) {
    EXPECT_EQ(fp(mine[d]), fp(model)) << mine[d];
    EXPECT_EQ(fp(theirs[d]), fp(other)) << theirs[d];
  }

  r = testing::run_command({k3ctl(), "place", "--model", other, "--drives", joined(mine),
                            "--file-gb", "0.001", "--apply"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.err,
                  "exists and is not the file this plan writes (another table, or of "
                  "another model)");
  EXPECT_EQ(fp(mine[0]), fp(model)) << "nothing written";

  std::vector<std::string> files;
  for (const auto& f : fs::directory_iterator(mine[0]))
    if (f.path().extension() == ".safetensors") files.push_back(f.path().filename().string());
  std::sort(files.begin(), files.end());
  ASSERT_GE(files.size(), 2u);
  fs::copy_file(theirs[0] + "/" + files[1], mine[0] + "/" + files[1],
                fs::copy_options::overwrite_existing);
  auto mixed = checkpoint::Checkpoint::open(mine[0], {}, checkpoint::ShardPolicy::kPresent);
  ASSERT_FALSE(mixed.ok());
  EXPECT_EQ(mixed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_CONTAINS(std::string(mixed.status().message()),
                  "files of two models: " + mine[0] + "/" + files[1]);
}

// Issue 24: a source without its vision shards places every expert (with a
// warning; refused under --strict); a missing text shard fails naming it.
TEST(Place, SourceWithoutItsVisionShards) {
  TempDir tmp;
  const std::string model = tmp.file("model");
  fs::copy(testing::tiny_model_dir(), model, fs::copy_options::recursive);
  const std::string tower = "model-00005-of-00005.safetensors";
  fs::remove(model + "/" + tower);
  const auto drives = make_drives(tmp, "nvme", 2);
  auto r = testing::run_command(
      {k3ctl(), "place", "--model", model, "--drives", joined(drives), "--apply"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.err, "k3ctl place: warning: shard " + tower +
                             " named by the index is missing; its 5 tensor(s) are not used by "
                             "the model");
  auto src = checkpoint::Checkpoint::open(model);
  ASSERT_TRUE(src.ok()) << src.status();
  auto d0 = checkpoint::Checkpoint::open(drives[0], {}, checkpoint::ShardPolicy::kPresent);
  ASSERT_TRUE(d0.ok()) << d0.status();
  const std::string e = "model.layers.1.block_sparse_moe.experts.0.w1.weight_packed";
  auto d1 = checkpoint::Checkpoint::open(drives[1], {}, checkpoint::ShardPolicy::kPresent);
  ASSERT_TRUE(d1.ok()) << d1.status();
  EXPECT_EQ(bytes_of(**src, e), (*d0)->find(e) ? bytes_of(**d0, e) : bytes_of(**d1, e));

  const auto more = make_drives(tmp, "strict", 2);
  r = testing::run_command(
      {k3ctl(), "place", "--model", model, "--drives", joined(more), "--strict"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.err, "they hold only tensors the model does not use (--strict)");

  const std::string text = "model-00002-of-00005.safetensors";
  fs::remove(model + "/" + text);
  r = testing::run_command({k3ctl(), "place", "--model", model, "--drives", joined(more)});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.err, "shard " + text + " named by the index is missing from " + model +
                             "; it holds tensor 'language_model.model.layers.");
}

}  // namespace
}  // namespace k3
