// k3ctl manifest / verify as real processes on a copy of the tiny model:
// every byte hashed, a flipped byte named by tensor or expert, a torn run
// resumed, whole files checked against a sha256sum list.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "shared/base/file.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/expert_index.h"
#include "shared/checkpoint/manifest.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::TempDir;

std::string k3ctl() {
  return testing::bin_dir() + "/k3ctl";
}

std::string copy_model(const TempDir& tmp) {
  const std::string dst = tmp.file("model");
  fs::copy(testing::tiny_model_dir(), dst, fs::copy_options::recursive);
  return dst;
}

std::vector<json> json_lines(const std::string& out) {
  std::vector<json> v;
  std::istringstream in(out);
  for (std::string l; std::getline(in, l);)
    if (!l.empty()) v.push_back(json::parse(l));
  return v;
}

void flip_byte(const std::string& path, uint64_t offset) {
  std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
  f.seekg(static_cast<std::streamoff>(offset));
  char c = 0;
  f.read(&c, 1);
  c = static_cast<char>(c ^ 0x40);
  f.seekp(static_cast<std::streamoff>(offset));
  f.write(&c, 1);
}

TEST(Integrity, ManifestCoversEveryByteAndVerifyNamesWhatIsBad) {
  TempDir tmp;
  const std::string model = copy_model(tmp);
  const std::string man = tmp.file("tiny.manifest");
  auto r = testing::run_command({k3ctl(), "manifest", "--model", model, "--out", man});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_FALSE(fs::exists(man + ".partial"));

  auto ck = checkpoint::Checkpoint::open(model);
  ASSERT_TRUE(ck.ok());
  auto c = checkpoint::load_model_config(model);
  auto m = checkpoint::Manifest::load(man);
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->header().fingerprint, (*ck)->fingerprint());
  // One entry per routed expert, one per other tensor; together every byte.
  const int64_t experts = c->num_moe_layers() * c->num_experts;
  uint64_t bytes = 0;
  int64_t expert_entries = 0;
  for (const checkpoint::ManifestEntry& e : m->entries()) {
    bytes += e.bytes;
    expert_entries += e.kind == checkpoint::ManifestEntry::Kind::kExpert;
  }
  EXPECT_EQ(expert_entries, experts);
  EXPECT_EQ(m->entries().size(), (*ck)->tensors().size() - 6 * experts + experts);
  EXPECT_EQ(bytes, (*ck)->total_bytes());

  r = testing::run_command({k3ctl(), "verify", "--model", model, "--manifest", man});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  json summary = json_lines(r.out).back();
  EXPECT_EQ(summary["bad"], 0);
  EXPECT_EQ(summary["missing"], 0);
  EXPECT_EQ(summary["bytes"], (*ck)->total_bytes());

  // One flipped bit inside expert 5 of the first MoE layer, one in a norm.
  auto idx = checkpoint::ExpertIndex::build(**ck, *c);
  const int64_t layer = c->first_k_dense_replace;
  const checkpoint::ExpertLocation& loc = idx->at(layer, 5);
  flip_byte((*ck)->files()[loc.file], loc.offset + loc.length / 2);
  const checkpoint::TensorInfo* norm = (*ck)->find("model.norm.weight");
  ASSERT_NE(norm, nullptr);
  flip_byte((*ck)->files()[norm->file], norm->offset + 3);

  r = testing::run_command({k3ctl(), "verify", "--model", model, "--manifest", man});
  EXPECT_EQ(r.exit_code, 1);
  auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  std::set<std::string> named;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    if (lines[i].contains("bad_expert")) {
      EXPECT_EQ(lines[i]["layer"], layer);
      EXPECT_EQ(lines[i]["expert"], 5);
      EXPECT_EQ(lines[i]["file"], (*ck)->files()[loc.file]);
      named.insert(lines[i]["bad_expert"].get<std::string>());
    } else {
      named.insert(lines[i]["bad_tensor"].get<std::string>());
    }
    EXPECT_NE(lines[i]["reason"].get<std::string>().find("xxh3-128 mismatch"), std::string::npos);
  }
  EXPECT_EQ(named,
            (std::set<std::string>{"model.norm.weight", "model.layers." + std::to_string(layer) +
                                                            ".block_sparse_moe.experts.5"}));
  EXPECT_EQ(lines.back()["bad"], 2);
  EXPECT_NE(r.err.find("2 problem(s) found"), std::string::npos) << r.err;
}

TEST(Integrity, AnInterruptedManifestResumesFromItsCompleteLines) {
  TempDir tmp;
  const std::string model = copy_model(tmp);
  const std::string full = tmp.file("full.manifest");
  ASSERT_EQ(testing::run_command({k3ctl(), "manifest", "--model", model, "--out", full}).exit_code,
            0);
  const std::string text = testing::read_file(full);
  // A run killed mid-line: the header, 10 entries and half of the 11th.
  size_t cut = 0;
  for (int i = 0; i < 11; ++i) cut = text.find('\n', cut) + 1;
  cut += 20;
  const std::string out = tmp.file("resumed.manifest");
  testing::write_file(out + ".partial", text.substr(0, cut));
  const auto before = testing::dir_snapshot(model);
  auto r = testing::run_command({k3ctl(), "manifest", "--model", model, "--out", out});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["resumed_entries"], 10);
  EXPECT_NE(r.err.find("resuming"), std::string::npos);
  EXPECT_EQ(testing::read_file(out), text);
  EXPECT_FALSE(fs::exists(out + ".partial"));
  EXPECT_EQ(testing::dir_snapshot(model), before);

  // A partial file of another model's plan is not trusted: started over.
  testing::write_file(out + ".partial", "{\"k3_manifest\":1}\ngarbage\n");
  r = testing::run_command({k3ctl(), "manifest", "--model", model, "--out", out, "--force"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["resumed_entries"], 0);
  EXPECT_EQ(testing::read_file(out), text);
}

TEST(Integrity, RefusalsNameTheProblem) {
  TempDir tmp;
  const std::string model = copy_model(tmp);
  auto r = testing::run_command(
      {k3ctl(), "manifest", "--model", model, "--out", model + "/inside.manifest"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("must be written outside it"), std::string::npos) << r.err;
  EXPECT_FALSE(fs::exists(model + "/inside.manifest.partial"));

  const std::string man = tmp.file("m");
  ASSERT_EQ(testing::run_command({k3ctl(), "manifest", "--model", model, "--out", man}).exit_code,
            0);
  r = testing::run_command({k3ctl(), "manifest", "--model", model, "--out", man});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("exists; --force rewrites it"), std::string::npos) << r.err;

  // Another model's manifest.
  json cfg = json::parse(testing::read_file(model + "/config.json"));
  cfg["text_config"]["rms_norm_eps"] = 1e-6;
  const std::string other = tmp.file("other");
  fs::copy(model, other, fs::copy_options::recursive);
  testing::write_file(other + "/config.json", cfg.dump());
  r = testing::run_command({k3ctl(), "verify", "--model", other, "--manifest", man});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is the manifest of another model"), std::string::npos) << r.err;

  // A truncated manifest.
  const std::string text = testing::read_file(man);
  testing::write_file(tmp.file("cut"), text.substr(0, text.size() / 2));
  r = testing::run_command({k3ctl(), "verify", "--model", model, "--manifest", tmp.file("cut")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("truncated manifest?"), std::string::npos) << r.err;

  r = testing::run_command({k3ctl(), "verify", "--model", model});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("verify needs --manifest FILE, --sha256 FILE or both"), std::string::npos);
}

TEST(Integrity, ShardsSpreadOverDrivesVerifyTogether) {
  TempDir tmp;
  const std::string model = copy_model(tmp);
  const std::string man = tmp.file("m");
  ASSERT_EQ(testing::run_command({k3ctl(), "manifest", "--model", model, "--out", man}).exit_code,
            0);
  // Shard 2 moved to a second drive: the manifest is keyed by name, not path.
  const std::string drive = tmp.file("drive2");
  fs::create_directory(drive);
  const std::string shard = "model-00002-of-00005.safetensors";
  fs::rename(model + "/" + shard, drive + "/" + shard);
  auto r = testing::run_command(
      {k3ctl(), "verify", "--model", model, "--shard-dir", drive, "--manifest", man});
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
}

TEST(Integrity, Sha256ListsAreChecked) {
  TempDir tmp;
  const std::string model = copy_model(tmp);
  std::string list;
  for (const auto& e : fs::directory_iterator(model)) {
    if (e.path().extension() != ".safetensors") continue;
    auto r = testing::run_command({"/usr/bin/sha256sum", e.path().string()});
    ASSERT_EQ(r.exit_code, 0);
    list += r.out.substr(0, 64) + "  " + e.path().filename().string() + "\n";
  }
  testing::write_file(tmp.file("SHA256SUMS"), list);
  auto r = testing::run_command(
      {k3ctl(), "verify", "--model", model, "--sha256", tmp.file("SHA256SUMS")});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(json_lines(r.out).back()["bad_files"], 0);

  flip_byte(model + "/model-00001-of-00005.safetensors", 100000);
  testing::write_file(tmp.file("SHA256SUMS"), list + std::string(64, 'a') + "  absent.bin\n");
  r = testing::run_command(
      {k3ctl(), "verify", "--model", model, "--sha256", tmp.file("SHA256SUMS")});
  EXPECT_EQ(r.exit_code, 1);
  auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 3u) << r.out;
  std::map<std::string, std::string> bad;
  for (size_t i = 0; i < 2; ++i) bad[lines[i]["bad_file"]] = lines[i]["reason"];
  EXPECT_EQ(bad["model-00001-of-00005.safetensors"], "sha256 mismatch");
  EXPECT_EQ(bad["absent.bin"], "missing");

  testing::write_file(tmp.file("EVIL"), std::string(64, 'a') + "  ../../etc/passwd\n");
  r = testing::run_command({k3ctl(), "verify", "--model", model, "--sha256", tmp.file("EVIL")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is not a path inside the model"), std::string::npos) << r.err;
}

// Issue 24: a snapshot without its vision shards. manifest covers what is on
// disk; verify against the complete snapshot's manifest (or sha256 list)
// reports what the absent shards held as absent, not bad; --strict refuses
// both; a missing text shard fails naming the shard and a tensor.
TEST(Integrity, SnapshotWithoutItsVisionShards) {
  TempDir tmp;
  const std::string model = copy_model(tmp);
  const std::string full = tmp.file("full.manifest");
  ASSERT_EQ(testing::run_command({k3ctl(), "manifest", "--model", model, "--out", full}).exit_code,
            0);
  std::string list;
  for (const auto& e : fs::directory_iterator(model)) {
    if (e.path().extension() != ".safetensors") continue;
    auto r = testing::run_command({"/usr/bin/sha256sum", e.path().string()});
    ASSERT_EQ(r.exit_code, 0);
    list += r.out.substr(0, 64) + "  " + e.path().filename().string() + "\n";
  }
  testing::write_file(tmp.file("SHA256SUMS"), list);
  const std::string tower = "model-00005-of-00005.safetensors";
  fs::remove(model + "/" + tower);

  // manifest: the tower's tensors are simply not there.
  const std::string part = tmp.file("part.manifest");
  auto r = testing::run_command({k3ctl(), "manifest", "--model", model, "--out", part});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.err, "k3ctl manifest: warning: shard " + tower +
                             " named by the index is missing; its 5 tensor(s) are not used by "
                             "the model");
  EXPECT_EQ(testing::read_file(part).find("vision_tower."), std::string::npos);
  EXPECT_NE(testing::read_file(part).find("mm_projector."), std::string::npos);
  r = testing::run_command(
      {k3ctl(), "manifest", "--model", model, "--out", part, "--force", "--strict"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_CONTAINS(r.err, "they hold only tensors the model does not use (--strict)");

  // verify against the complete snapshot's manifest.
  r = testing::run_command({k3ctl(), "verify", "--model", model, "--manifest", full});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 6u) << r.out;
  for (size_t i = 0; i < 5; ++i)
    EXPECT_EQ(lines[i]["absent_unused_tensor"].get<std::string>().rfind("vision_tower.", 0), 0u)
        << lines[i];
  EXPECT_EQ(lines.back()["missing"], 0);
  EXPECT_EQ(lines.back()["absent_unused"], 5);
  EXPECT_EQ(lines.back()["bad"], 0);
  EXPECT_CONTAINS(r.err, "k3ctl verify: warning: shard " + tower);
  r = testing::run_command({k3ctl(), "verify", "--model", model, "--manifest", full, "--strict"});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_CONTAINS(r.err, "(--strict)");

  // verify against the complete snapshot's sha256 list.
  r = testing::run_command(
      {k3ctl(), "verify", "--model", model, "--sha256", tmp.file("SHA256SUMS")});
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  lines = json_lines(r.out);
  ASSERT_EQ(lines.size(), 2u) << r.out;
  EXPECT_EQ(lines[0]["absent_unused_file"], tower);
  EXPECT_EQ(lines[1]["bad_files"], 0);
  r = testing::run_command(
      {k3ctl(), "verify", "--model", model, "--sha256", tmp.file("SHA256SUMS"), "--strict"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(json_lines(r.out)[0]["bad_file"], tower);

  // A text shard gone too: both commands fail, naming it and a tensor.
  const std::string text = "model-00003-of-00005.safetensors";
  fs::remove(model + "/" + text);
  for (const char* command : {"manifest", "verify"}) {
    r = testing::run_command({k3ctl(), command, "--model", model,
                              std::string(command) == "manifest" ? "--out" : "--manifest",
                              std::string(command) == "manifest" ? tmp.file("x") : full});
    EXPECT_NE(r.exit_code, 0) << command;
    EXPECT_CONTAINS(r.err, "shard " + text + " named by the index is missing from " + model +
                               "; it holds tensor 'language_model.lm_head.weight', which the "
                               "model uses");
  }
  r = testing::run_command(
      {k3ctl(), "verify", "--model", model, "--sha256", tmp.file("SHA256SUMS")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_CONTAINS(r.out, "\"bad_file\":\"" + text + "\",\"reason\":\"missing\"");
}

}  // namespace
}  // namespace k3
