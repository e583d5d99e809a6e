// Issue 29 item 5: the model fingerprint covers the weights. Two mkmodel
// seeds of one config differ; every view of one snapshot agrees (the dense
// shards engined opens, the shards an expertd holds, a repacked container and
// its expert shards alone); files of two models and a set of shards with no
// identity are refused at open, naming the files.
#include "shared/checkpoint/model_identity.h"

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/container.h"
#include "shared/checkpoint/repack.h"
#include "shared/checkpoint/safetensors_writer.h"
#include "tests/test_util.h"
#include "tools/mkmodel/mkmodel.h"

namespace k3 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using checkpoint::ShardPolicy;
using testing::TempDir;

const std::string kEmbedShard = "model-00001-of-00005.safetensors";
const std::string kExpertShard = "model-00002-of-00005.safetensors";

// The tiny model of another seed: the same config.json, byte for byte.
const std::string& other_seed_dir() {
  static TempDir dir;
  static const std::string path = [] {
    tools::MkModelOptions o;
    o.out_dir = dir.path() + "/seed2";
    o.seed = 2;
    o.progress = false;
    auto r = tools::make_model(o);
    if (!r.ok()) throw std::runtime_error(std::string(r.status().message()));
    return o.out_dir;
  }();
  return path;
}

uint64_t fingerprint_of(const std::string& dir, ShardPolicy p = ShardPolicy::kAll) {
  auto ck = checkpoint::Checkpoint::open(dir, {}, p);
  EXPECT_TRUE(ck.ok()) << dir << ": " << ck.status();
  return ck.ok() ? (*ck)->fingerprint() : 0;
}

std::string copy_of(const std::string& src, const std::string& dst) {
  fs::copy(src, dst, fs::copy_options::recursive);
  return dst;
}

// Rewrites `path` with the same tensors and bytes and `metadata` in its header.
void restamp(const std::string& path, const std::map<std::string, std::string>& metadata) {
  auto h = checkpoint::read_safetensors_header(path);
  ASSERT_TRUE(h.ok()) << h.status();
  auto in = base::File::open_read(path);
  ASSERT_TRUE(in.ok());
  std::vector<checkpoint::SafetensorsWriter::Entry> entries;
  for (const auto& t : h->tensors) entries.push_back({t.name, t.dtype, t.shape});
  const std::string out = path + ".new";
  auto w = checkpoint::SafetensorsWriter::create(out, entries, metadata);
  ASSERT_TRUE(w.ok()) << w.status();
  for (const auto& t : h->tensors) {
    std::vector<char> bytes(t.nbytes);
    ASSERT_TRUE(in->pread_exact(bytes.data(), bytes.size(), t.offset).ok());
    ASSERT_TRUE((*w)->write(bytes.data(), bytes.size()).ok());
  }
  ASSERT_TRUE((*w)->finish().ok());
  fs::rename(out, path);
}

TEST(ModelIdentity, SampleRangesArePagesAtFixedPlacesOfTheTensor) {
  using R = std::vector<std::pair<uint64_t, uint64_t>>;
  EXPECT_EQ(checkpoint::identity_sample_ranges(0), R{});
  EXPECT_EQ(checkpoint::identity_sample_ranges(100), (R{{0, 100}}));
  EXPECT_EQ(checkpoint::identity_sample_ranges(4096), (R{{0, 4096}}));
  // Overlapping pages keep only their new bytes: every byte once, the tail too.
  EXPECT_EQ(checkpoint::identity_sample_ranges(5000), (R{{0, 4096}, {4096, 904}}));
  const uint64_t big = 2'348'810'240;  // the real embedding: 163840 x 7168 BF16
  const R r = checkpoint::identity_sample_ranges(big);
  ASSERT_EQ(r.size(), static_cast<size_t>(checkpoint::kIdentityPages));
  EXPECT_EQ(r.front().first, 0u);
  EXPECT_EQ(r.back().first + r.back().second, big);
  for (size_t i = 0; i < r.size(); ++i) {
    EXPECT_EQ(r[i].second, checkpoint::kIdentityPageBytes);
    if (i + 1 < r.size()) {
      EXPECT_EQ(r[i].first % checkpoint::kIdentityPageBytes, 0u);
      EXPECT_LT(r[i].first + r[i].second, r[i + 1].first);
    }
  }
}

// The config part: key order and white space do not matter, another value
// does; and the weights' sample enters.
TEST(ModelIdentity, FingerprintOfConfigAndSample) {
  const std::string text = testing::read_file(testing::tiny_model_dir() + "/config.json");
  const base::Hash128 w{1, 2};
  const uint64_t fp = checkpoint::model_fingerprint(text, w);
  EXPECT_EQ(checkpoint::model_fingerprint(json::parse(text).dump(7), w), fp);
  json other = json::parse(text);
  other["text_config"]["rms_norm_eps"] = 1e-6;
  EXPECT_NE(checkpoint::model_fingerprint(other.dump(), w), fp);
  EXPECT_NE(checkpoint::model_fingerprint(text, base::Hash128{1, 3}), fp);
}

// The finding: two seeds share config.json and the tensor table, and had one
// fingerprint; now they differ, under every policy.
TEST(ModelIdentity, TwoSeedsOfOneConfigDiffer) {
  ASSERT_EQ(testing::read_file(testing::tiny_model_dir() + "/config.json"),
            testing::read_file(other_seed_dir() + "/config.json"));
  for (ShardPolicy p : {ShardPolicy::kAll, ShardPolicy::kDense, ShardPolicy::kPresent})
    EXPECT_NE(fingerprint_of(testing::tiny_model_dir(), p), fingerprint_of(other_seed_dir(), p))
        << static_cast<int>(p);
}

// engined's view (the dense shards), an expertd's (the shards present), other
// shard boundaries and a reformatted config all agree.
TEST(ModelIdentity, EveryViewOfOneSnapshotAgrees) {
  const uint64_t fp = fingerprint_of(testing::tiny_model_dir());
  EXPECT_EQ(fingerprint_of(testing::tiny_model_dir(), ShardPolicy::kDense), fp);
  TempDir tmp;
  const std::string part = copy_of(testing::tiny_model_dir(), tmp.file("part"));
  fs::remove(part + "/model-00003-of-00005.safetensors");
  EXPECT_EQ(fingerprint_of(part, ShardPolicy::kPresent), fp);

  tools::MkModelOptions o;
  o.out_dir = tmp.file("five");
  o.shards = 5;
  o.progress = false;
  ASSERT_TRUE(tools::make_model(o).ok());
  EXPECT_EQ(fingerprint_of(o.out_dir), fp) << "other shard boundaries and offsets";

  const std::string re = copy_of(testing::tiny_model_dir(), tmp.file("re"));
  testing::write_file(re + "/config.json",
                      json::parse(testing::read_file(re + "/config.json")).dump(3));
  EXPECT_EQ(fingerprint_of(re), fp);
}

// A repacked container keeps the identity (the embedding passes through and
// every shard is stamped): its dense shard, its expert shards alone, and a
// dense-only container agree with the source.
TEST(ModelIdentity, ARepackedContainerKeepsIt) {
  TempDir tmp;
  const uint64_t fp = fingerprint_of(testing::tiny_model_dir());
  checkpoint::RepackOptions ro;
  ro.model_dir = testing::tiny_model_dir();
  ro.out_dir = tmp.file("c");
  auto r = checkpoint::repack(ro);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(fingerprint_of(ro.out_dir), fp);
  EXPECT_EQ(fingerprint_of(ro.out_dir, ShardPolicy::kDense), fp);
  auto info = checkpoint::read_container_info(ro.out_dir);
  ASSERT_TRUE(info.ok() && info->has_value());
  EXPECT_EQ((*info)->fingerprint, fp);
  // A sampled byte of the stamped embedding altered: refused, naming the file.
  {
    const std::string copy = copy_of(ro.out_dir, tmp.file("c-flipped"));
    auto ck = checkpoint::Checkpoint::open(copy);
    ASSERT_TRUE(ck.ok()) << ck.status();
    const checkpoint::TensorInfo* e = (*ck)->find(checkpoint::kIdentityTensor);
    ASSERT_NE(e, nullptr);
    const std::string file = (*ck)->files()[e->file];
    char b = 0;
    ASSERT_TRUE((*ck)->read_bytes(*e, 40, 1, &b).ok());
    b ^= 1;
    auto f = base::File::open_write(file);  // write-only
    ASSERT_TRUE(f.ok());
    ASSERT_TRUE(f->pwrite_all(&b, 1, e->offset + 40).ok());
    auto bad = checkpoint::Checkpoint::open(copy);
    ASSERT_FALSE(bad.ok());
    EXPECT_EQ(bad.status().code(), absl::StatusCode::kDataLoss);
    EXPECT_CONTAINS(std::string(bad.status().message()),
                    file + " is stamped model fingerprint " + base::hex64(fp));
    EXPECT_CONTAINS(std::string(bad.status().message()),
                    "the embedding's bytes changed after the file was written");
  }
  // Its expert shards without the dense one: the stamps say which model.
  char dense_shard[64];
  std::snprintf(dense_shard, sizeof dense_shard, "/model-00001-of-%05lld.safetensors",
                static_cast<long long>(r->shards));
  ASSERT_TRUE(fs::remove(ro.out_dir + dense_shard));
  auto experts = checkpoint::Checkpoint::open(ro.out_dir, {}, ShardPolicy::kPresent);
  ASSERT_TRUE(experts.ok()) << experts.status();
  EXPECT_EQ((*experts)->find(checkpoint::kIdentityTensor), nullptr);
  EXPECT_EQ((*experts)->fingerprint(), fp);

  ro.out_dir = tmp.file("d");
  ro.dense_only = true;
  ASSERT_TRUE(checkpoint::repack(ro).ok());
  EXPECT_EQ(fingerprint_of(ro.out_dir), fp);
}

// Files of two models in one set are refused, naming the file and both
// fingerprints; a stamp that agrees is accepted; a malformed one is refused.
TEST(ModelIdentity, FilesOfTwoModelsAreRefused) {
  TempDir tmp;
  const uint64_t fp = fingerprint_of(testing::tiny_model_dir());
  const uint64_t other = fingerprint_of(other_seed_dir());
  const std::string m = copy_of(testing::tiny_model_dir(), tmp.file("m"));
  const std::string shard = m + "/" + kExpertShard;
  restamp(shard, {{checkpoint::kFingerprintMetadataKey, base::hex64(fp)}});
  if (HasFatalFailure()) return;
  EXPECT_EQ(fingerprint_of(m), fp);

  restamp(shard, {{checkpoint::kFingerprintMetadataKey, base::hex64(other)}});
  if (HasFatalFailure()) return;
  for (ShardPolicy p : {ShardPolicy::kAll, ShardPolicy::kPresent}) {
    auto ck = checkpoint::Checkpoint::open(m, {}, p);
    ASSERT_FALSE(ck.ok());
    EXPECT_EQ(ck.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_CONTAINS(
        std::string(ck.status().message()),
        "files of two models: " + shard + " is of model fingerprint " + base::hex64(other));
    EXPECT_CONTAINS(std::string(ck.status().message()),
                    m + "/" + kEmbedShard + " (its sampled '" +
                        std::string(checkpoint::kIdentityTensor) + "') of " + base::hex64(fp));
  }

  restamp(shard, {{checkpoint::kFingerprintMetadataKey, "not-hex"}});
  if (HasFatalFailure()) return;
  auto bad = checkpoint::Checkpoint::open(m);
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            shard + ": __metadata__ k3_model_fingerprint must be 16 lower-case hex digits");
}

// Shards with neither the embedding nor a stamp have no identity: refused,
// saying what would give one. A truncated shard is refused naming the file.
TEST(ModelIdentity, NoIdentityAndShortShardsAreRefused) {
  TempDir tmp;
  const std::string m = copy_of(testing::tiny_model_dir(), tmp.file("m"));
  fs::remove(m + "/" + kEmbedShard);
  auto ck = checkpoint::Checkpoint::open(m, {}, ShardPolicy::kPresent);
  ASSERT_FALSE(ck.ok());
  EXPECT_EQ(ck.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_CONTAINS(std::string(ck.status().message()),
                  m + ": cannot tell which model these shards are of");
  EXPECT_CONTAINS(std::string(ck.status().message()), "model.embed_tokens.weight");
  EXPECT_CONTAINS(std::string(ck.status().message()), "k3ctl place");

  const std::string t = copy_of(testing::tiny_model_dir(), tmp.file("t"));
  fs::resize_file(t + "/" + kEmbedShard, fs::file_size(t + "/" + kEmbedShard) - 1);
  auto cut = checkpoint::Checkpoint::open(t);
  ASSERT_FALSE(cut.ok());
  EXPECT_CONTAINS(std::string(cut.status().message()), t + "/" + kEmbedShard);
}

}  // namespace
}  // namespace k3
