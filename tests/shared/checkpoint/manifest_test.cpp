// The manifest round-trips and refuses bad files. engined --manifest: the
// dense tensors are checked at load (a flipped byte names the tensor and
// refuses the load; with --mmap only under --verify-dense), and every expert
// the in-process reader reads is checked like expertd does (a flipped byte
// fails each request that reads it, is counted, and is never cached).
#include "shared/checkpoint/manifest.h"

#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "engined/experts/source_factory.h"
#include "engined/model/model.h"
#include "shared/base/file.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/model_identity.h"
#include "shared/checkpoint/model_tensors.h"
#include "shared/checkpoint/repack.h"
#include "tests/test_util.h"

namespace k3 {

namespace {

std::string sample() {
  checkpoint::ManifestEntry t;
  t.kind = checkpoint::ManifestEntry::Kind::kTensor;
  t.name = "model.norm.weight";
  t.dtype = "BF16";
  t.shape = {512};
  t.bytes = 1024;
  t.hash = base::xxh3_128("a", 1);
  checkpoint::ManifestEntry e;
  e.kind = checkpoint::ManifestEntry::Kind::kExpert;
  e.name = "model.layers.3.block_sparse_moe.experts.7";
  e.layer = 3;
  e.id = 7;
  e.bytes = 4096;
  e.hash = base::xxh3_128("b", 1);
  return checkpoint::manifest_header_line({0x1234abcdull, 2}) + "\n" +
         checkpoint::manifest_entry_line(t) + "\n" + checkpoint::manifest_entry_line(e) + "\n";
}

TEST(Manifest, RoundTrips) {
  auto m = checkpoint::Manifest::parse(sample(), "m");
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_EQ(m->header().fingerprint, 0x1234abcdull);
  ASSERT_NE(m->tensor("model.norm.weight"), nullptr);
  EXPECT_EQ(m->tensor("model.norm.weight")->shape, std::vector<int64_t>{512});
  ASSERT_NE(m->expert(3, 7), nullptr);
  EXPECT_EQ(m->expert(3, 7)->hash, base::xxh3_128("b", 1));
  EXPECT_EQ(m->expert(3, 6), nullptr);
}

// Untrusted input: each defect refused with its line.
TEST(Manifest, RefusesBadFiles) {
  const std::string good = sample();
  const std::string header = good.substr(0, good.find('\n') + 1);
  const std::string line2 =
      good.substr(header.size(), good.find('\n', header.size()) + 1 - header.size());
  struct Case {
    std::string text, error;
  };
  const std::vector<Case> cases = {
      {"", "m: empty manifest"},
      {good.substr(0, good.size() - 1), "m:3: the last line does not end in a newline"},
      {header + line2, "m: the header announces 2 entries, the file holds 1"},
      {header + line2 + line2, "m:3: a second entry for model.norm.weight"},
      {"{\"k3_manifest\":3}\n", "m:1: not a k3 manifest header"},
      {"{\"k3_manifest\":1,\"hash\":\"xxh3-128\"}\n", "m:1: a manifest of version 1"},
      {"[1]\n", "m:1: not a JSON object"},
      {"{\"k3_manifest\":1,\"k3_manifest\":1}\n", "m:1: duplicate key 'k3_manifest'"},
      {header +
           "{\"tensor\":\"x\",\"dtype\":\"BF16\",\"shape\":[1],\"bytes\":2,\"xxh3_128\":\"zz\"}\n",
       "m:2: \"xxh3_128\" must be 32 hex digits"},
      {header + "{\"expert\":\"x\",\"layer\":-1,\"id\":0,\"bytes\":2,\"xxh3_128\":\"" +
           std::string(32, '0') + "\"}\n",
       "m:2: \"layer\" must be a non-negative integer"},
      {header + "{\"tensor\":\"x\",\"dtype\":\"BF16\",\"shape\":[1],\"bytes\":2,\"xxh3_128\":\"" +
           std::string(32, '0') + "\",\"extra\":1}\n",
       "m:2: unknown field \"extra\""},
      {header + "{\"neither\":1}\n", "m:2: neither a \"tensor\" nor an \"expert\" entry"},
  };
  for (const Case& c : cases) {
    auto m = checkpoint::Manifest::parse(c.text, "m");
    ASSERT_FALSE(m.ok()) << c.text;
    EXPECT_NE(std::string(m.status().message()).find(c.error), std::string::npos)
        << m.status() << " (wanted: " << c.error << ")";
  }
}

}  // namespace
}  // namespace k3

namespace k3::engined {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// A private copy of the tiny model (or of `src`) and its manifest.
struct ModelCopy {
  std::string dir, manifest;
};
ModelCopy copy_with_manifest(const TempDir& tmp, const std::string& name,
                             const std::string& src = testing::tiny_model_dir()) {
  ModelCopy m{tmp.file(name), tmp.file(name + ".manifest")};
  fs::copy(src, m.dir, fs::copy_options::recursive);
  auto r = testing::run_command(
      {testing::bin_dir() + "/k3ctl", "manifest", "--model", m.dir, "--out", m.manifest});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return m;
}

// Flips bit 4 of byte `at` of stored tensor `name` (logical name).
void flip_byte(const std::string& dir, const std::string& name, uint64_t at) {
  auto ck = checkpoint::Checkpoint::open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status();
  const checkpoint::TensorInfo* t = (*ck)->find(name);
  ASSERT_NE(t, nullptr) << name;
  ASSERT_LT(at, t->nbytes);
  uint8_t b = 0;
  ASSERT_TRUE((*ck)->read_bytes(*t, at, 1, &b).ok());
  b ^= 0x10;
  base::File f = *base::File::open_write((*ck)->files()[t->file]);
  ASSERT_TRUE(f.pwrite_all(&b, 1, t->offset + at).ok());
}

std::vector<int32_t> prompt(int64_t vocab) {
  std::vector<int32_t> ids;
  for (int i = 0; i < 12; ++i) ids.push_back(static_cast<int32_t>((i * 7919 + 13) % vocab));
  return ids;
}

std::string ids_arg(const std::vector<int32_t>& ids) {
  std::string s;
  for (size_t i = 0; i < ids.size(); ++i) s += (i ? "," : "") + std::to_string(ids[i]);
  return s;
}

std::shared_ptr<const checkpoint::Manifest> load_manifest(const std::string& path) {
  auto m = checkpoint::Manifest::load(path);
  EXPECT_TRUE(m.ok()) << m.status();
  return std::make_shared<const checkpoint::Manifest>(std::move(*m));
}

TEST(EngineManifest, ACleanModelScoresExactlyAsWithoutAndEveryReadIsChecked) {
  TempDir tmp;
  const ModelCopy m = copy_with_manifest(tmp, "clean");
  auto c = checkpoint::load_model_config(m.dir);
  const auto ids = prompt(c->vocab_size);
  auto plain = testing::run_command({testing::bin_dir() + "/engined", "score", "--model", m.dir,
                                     "--ids", ids_arg(ids), "--out", tmp.file("a.f32")});
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  auto checked =
      testing::run_command({testing::bin_dir() + "/engined", "score", "--model", m.dir, "--ids",
                            ids_arg(ids), "--out", tmp.file("b.f32"), "--manifest", m.manifest});
  ASSERT_EQ(checked.exit_code, 0) << checked.err;
  EXPECT_EQ(testing::read_file(tmp.file("a.f32")), testing::read_file(tmp.file("b.f32")));
  EXPECT_NE(checked.err.find("dense tensors verified against the manifest"), std::string::npos)
      << checked.err;

  EngineOptions opt;
  opt.manifest = load_manifest(m.manifest);
  auto model = Model::load(m.dir, {}, opt);
  ASSERT_TRUE(model.ok()) << model.status();
  ExpertSourceOptions xo;
  xo.manifest = opt.manifest;
  auto x = make_expert_source(xo, **model);
  ASSERT_TRUE(x.ok()) << x.status();
  auto seq = (*model)->new_sequence();
  std::vector<float> logits;
  ASSERT_TRUE((*model)->forward(**x, *seq, ids, 1, &logits).ok());
  const experts::ExpertSourceStats s = (*x)->stats();
  EXPECT_GT(s.reads, 0u);
  // Every read is checked, speculative ones too (they are not in `reads`).
  EXPECT_EQ(s.verified_reads, s.reads + s.speculative_reads);
  EXPECT_EQ(s.manifest_mismatches, 0u);
}

TEST(EngineManifest, AFlippedDenseByteNamesTheTensorAndRefusesToStart) {
  TempDir tmp;
  const ModelCopy m = copy_with_manifest(tmp, "bad-dense");
  const std::string name = checkpoint::tensor_names::layer(1, "input_layernorm.weight");
  flip_byte(m.dir, name, 6);
  EngineOptions opt;
  opt.manifest = load_manifest(m.manifest);
  auto model = Model::load(m.dir, {}, opt);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kDataLoss) << model.status();
  EXPECT_NE(msg(model.status()).find("dense tensor " + name + " ("), std::string::npos)
      << model.status();
  EXPECT_NE(msg(model.status()).find("fails its checksum"), std::string::npos) << model.status();
  // Without the manifest the same bytes load (nothing else notices).
  EXPECT_TRUE(Model::load(m.dir, {}, EngineOptions{}).ok());
  // engined serve refuses to start, naming it.
  auto r =
      testing::run_command({testing::bin_dir() + "/engined", "serve", "--model", m.dir, "--listen",
                            "unix:" + tmp.file("e.sock"), "--manifest", m.manifest});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("dense tensor " + name), std::string::npos) << r.err;
}

TEST(EngineManifest, AFlippedExpertByteFailsEveryReadAndIsNeverCached) {
  TempDir tmp;
  const ModelCopy m = copy_with_manifest(tmp, "bad-expert");
  auto c = checkpoint::load_model_config(m.dir);
  const int64_t layer = c->first_k_dense_replace;
  for (int64_t x = 0; x < c->num_experts; ++x)
    flip_byte(m.dir, checkpoint::tensor_names::expert(layer, x, 1, /*packed=*/true), 100);
  EngineOptions opt;
  opt.manifest = load_manifest(m.manifest);
  auto model = Model::load(m.dir, {}, opt);
  ASSERT_TRUE(model.ok()) << model.status() << " (the dense tensors are intact)";
  ExpertSourceOptions xo;
  xo.manifest = opt.manifest;
  xo.cache_bytes = 0;  // the minimum: forces re-reads
  auto x = make_expert_source(xo, **model);
  ASSERT_TRUE(x.ok()) << x.status();
  const auto ids = prompt(c->vocab_size);
  for (int attempt = 1; attempt <= 3; ++attempt) {
    auto seq = (*model)->new_sequence();
    std::vector<float> logits;
    Status s = (*model)->forward(**x, *seq, ids, 1, &logits);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
    EXPECT_NE(msg(s).find(cat(" of layer ", layer, " (")), std::string::npos) << s;
    EXPECT_NE(msg(s).find("the manifest has"), std::string::npos) << s;
    EXPECT_NE(msg(s).find(".safetensors at offset "), std::string::npos) << s;
    EXPECT_GE((*x)->stats().manifest_mismatches, static_cast<uint64_t>(attempt))
        << "every read is checked, not only the first";
  }
  // The hit count stays zero for that layer's experts: a refused read is
  // never cached (each attempt above read them again).
  EXPECT_GE((*x)->stats().verified_reads, (*x)->stats().manifest_mismatches);
  // engined score exits non-zero naming the expert.
  auto r =
      testing::run_command({testing::bin_dir() + "/engined", "score", "--model", m.dir, "--ids",
                            ids_arg(ids), "--out", tmp.file("l.f32"), "--manifest", m.manifest});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("fails the manifest check"), std::string::npos) << r.err;
}

TEST(EngineManifest, WithMmapDenseTensorsAreVerifiedOnlyWithVerifyDense) {
  TempDir tmp;
  checkpoint::RepackOptions o;
  o.model_dir = testing::tiny_model_dir();
  o.out_dir = tmp.file("container-src");
  o.dense_bits = 4;
  o.mla_bits = 8;
  o.head_bits = 8;
  ASSERT_TRUE(checkpoint::repack(o).ok());
  const ModelCopy m = copy_with_manifest(tmp, "container", o.out_dir);
  // A byte of a mapped matrix of the container.
  auto ck = checkpoint::Checkpoint::open(m.dir);
  ASSERT_TRUE(ck.ok());
  // The biggest dense tensor: a prepared matrix the mapping views (not the
  // embedding: its sampled pages are the model's identity, checked at open,
  // model_identity_test.cpp).
  std::string victim;
  uint64_t most = 0;
  for (const checkpoint::TensorInfo& t : (*ck)->tensors())
    if (!checkpoint::is_routed_expert_tensor(t.name) && t.nbytes > most &&
        t.name != (*ck)->prefix() + std::string(checkpoint::kIdentityTensor)) {
      victim = t.name.substr((*ck)->prefix().size());
      most = t.nbytes;
    }
  ASSERT_FALSE(victim.empty());
  flip_byte(m.dir, victim, 40);
  const std::vector<std::string> base = {testing::bin_dir() + "/engined",
                                         "score",
                                         "--model",
                                         m.dir,
                                         "--ids",
                                         "1,2,3",
                                         "--out",
                                         tmp.file("l.f32"),
                                         "--mmap",
                                         "--manifest",
                                         m.manifest};
  // --mmap without --verify-dense: the mapping is not read through; said so.
  auto r = testing::run_command(base);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("dense tensors not verified (--verify-dense"), std::string::npos) << r.err;
  auto with = base;
  with.push_back("--verify-dense");
  r = testing::run_command(with);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("dense tensor " + victim), std::string::npos) << r.err;
  // --verify-dense means nothing without a manifest: refused.
  r = testing::run_command({testing::bin_dir() + "/engined", "score", "--model", m.dir, "--ids",
                            "1,2,3", "--out", tmp.file("l.f32"), "--mmap", "--verify-dense"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--verify-dense needs --manifest"), std::string::npos) << r.err;
}

TEST(EngineManifest, AManifestOfAnotherModelIsRefused) {
  TempDir tmp;
  const std::string man = tmp.file("m");
  testing::write_file(man, checkpoint::manifest_header_line({0x1234, 0}) + "\n");
  auto r = testing::run_command({testing::bin_dir() + "/engined", "score", "--model",
                                 testing::tiny_model_dir(), "--ids", "1,2", "--out",
                                 tmp.file("l.f32"), "--manifest", man});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("the manifest is of another model"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace k3::engined
