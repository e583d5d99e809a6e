// Snapshot files (--checkpoint-dir): a state round-trips bit for bit; a file
// of another model, bits or top-p, a flipped byte anywhere, a truncation or a
// stray file is refused with the code the store acts on, never half-read.
#include "engined/serving/snapshot_file.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "tests/test_util.h"

namespace k3::engined {
namespace {

namespace fs = std::filesystem;

struct Fixture {
  checkpoint::ModelConfig config;
  SequenceState state;
  std::vector<float> logits;
  std::vector<int32_t> tokens;
  SnapshotIdentity id{0x6b33, 4, 0.75f};
  explicit Fixture(int64_t n)
      : config(*checkpoint::load_model_config(testing::tiny_model_dir())), state(config) {
    state.position = n;
    float v = 0.0f;
    for (size_t l = 0; l < state.kda.size(); ++l) {
      for (float& x : state.kda[l].s) x = (v += 0.001f);
      for (float& x : state.kda[l].conv_v) x = -(v += 0.001f);
      if (config.is_kda(static_cast<int64_t>(l))) continue;
      state.mla[l].ckv.assign(static_cast<size_t>(n * config.kv_lora_rank), 0.5f);
      state.mla[l].k_r.assign(static_cast<size_t>(n * config.qk_rope_head_dim), -0.25f);
    }
    logits.assign(static_cast<size_t>(config.vocab_size), 1.5f);
    for (int64_t i = 0; i < n; ++i) tokens.push_back(static_cast<int32_t>(100 + i));
  }
};

std::string slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(f), {});
}

void spit(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

TEST(SnapshotFile, RoundTripsBitForBit) {
  testing::TempDir tmp;
  Fixture fx(24);
  const std::string path = tmp.file(snapshot_file_name(fx.id, fx.tokens));
  ASSERT_TRUE(is_snapshot_file_name(fs::path(path).filename().string()));
  ASSERT_TRUE(write_snapshot_file(path, fx.id, fx.tokens, fx.state, fx.logits).ok());
  EXPECT_EQ(fs::file_size(path), snapshot_file_bytes(fx.config, 24));
  auto h = read_snapshot_header(path, fx.config);
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->tokens, fx.tokens);
  EXPECT_TRUE(h->identity == fx.id);
  auto r = read_snapshot_file(path, fx.config, fx.id, fx.tokens);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->tokens, 24);
  EXPECT_EQ(r->state->position, 24);
  EXPECT_EQ(r->logits, fx.logits);
  for (size_t l = 0; l < fx.state.kda.size(); ++l) {
    EXPECT_EQ(r->state->kda[l].s, fx.state.kda[l].s) << l;
    EXPECT_EQ(r->state->kda[l].conv_v, fx.state.kda[l].conv_v) << l;
    EXPECT_EQ(r->state->mla[l].ckv, fx.state.mla[l].ckv) << l;
    EXPECT_EQ(r->state->mla[l].k_r, fx.state.mla[l].k_r) << l;
  }
  // No temporary is left behind.
  size_t files = 0;
  for (auto it = fs::directory_iterator(tmp.path()); it != fs::directory_iterator(); ++it) ++files;
  EXPECT_EQ(files, 1u);
}

TEST(SnapshotFile, NamesDependOnTheIdentityAndTheTokens) {
  Fixture fx(4);
  SnapshotIdentity other = fx.id;
  other.expert_top_p = 1.0f;
  EXPECT_NE(snapshot_file_name(fx.id, fx.tokens), snapshot_file_name(other, fx.tokens));
  auto longer = fx.tokens;
  longer.push_back(1);
  EXPECT_NE(snapshot_file_name(fx.id, fx.tokens), snapshot_file_name(fx.id, longer));
  EXPECT_FALSE(is_snapshot_file_name("ckpt-0.k3s"));
  EXPECT_FALSE(is_snapshot_file_name("snap-xyz.k3snap"));
  EXPECT_TRUE(is_snapshot_temp_name("." + snapshot_file_name(fx.id, fx.tokens) + ".tmp.12.0"));
  EXPECT_FALSE(is_snapshot_temp_name(snapshot_file_name(fx.id, fx.tokens)));
}

TEST(SnapshotFile, AnotherModelBitsOrTopPIsRefused) {
  testing::TempDir tmp;
  Fixture fx(8);
  const std::string path = tmp.file("s.k3snap");
  ASSERT_TRUE(write_snapshot_file(path, fx.id, fx.tokens, fx.state, fx.logits).ok());
  for (SnapshotIdentity other : {SnapshotIdentity{1, 4, 0.75f}, SnapshotIdentity{0x6b33, 8, 0.75f},
                                 SnapshotIdentity{0x6b33, 4, 1.0f}}) {
    auto r = read_snapshot_file(path, fx.config, other, fx.tokens);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition) << r.status();
  }
  auto shorter = fx.tokens;
  shorter.back() = 7;
  EXPECT_EQ(read_snapshot_file(path, fx.config, fx.id, shorter).status().code(),
            absl::StatusCode::kDataLoss);
}

TEST(SnapshotFile, EveryFlippedByteAndEveryTruncationIsRefused) {
  testing::TempDir tmp;
  Fixture fx(3);
  const std::string path = tmp.file("s.k3snap");
  ASSERT_TRUE(write_snapshot_file(path, fx.id, fx.tokens, fx.state, fx.logits).ok());
  const std::string genuine = slurp(path);
  // Every byte of the header, the tokens and the trailer, and a stride
  // through the payload.
  std::vector<size_t> offsets;
  for (size_t i = 0; i < 64 + 12; ++i) offsets.push_back(i);
  for (size_t i = 76; i < genuine.size() - 16; i += 4099) offsets.push_back(i);
  for (size_t i = genuine.size() - 16; i < genuine.size(); ++i) offsets.push_back(i);
  for (size_t off : offsets) {
    std::string bad = genuine;
    bad[off] = static_cast<char>(bad[off] ^ 0x01);
    spit(path, bad);
    auto r = read_snapshot_file(path, fx.config, fx.id, fx.tokens);
    ASSERT_FALSE(r.ok()) << "byte " << off << " flipped was accepted";
    EXPECT_NE(r.status().code(), absl::StatusCode::kNotFound) << off;
  }
  for (size_t len : {size_t{0}, size_t{10}, size_t{64}, genuine.size() / 2, genuine.size() - 1}) {
    spit(path, genuine.substr(0, len));
    auto r = read_snapshot_file(path, fx.config, fx.id, fx.tokens);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kDataLoss) << len << ": " << r.status();
  }
  spit(path, genuine + "x");
  EXPECT_EQ(read_snapshot_file(path, fx.config, fx.id, fx.tokens).status().code(),
            absl::StatusCode::kDataLoss);
  fs::remove(path);
  EXPECT_EQ(read_snapshot_file(path, fx.config, fx.id, fx.tokens).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(read_snapshot_header(path, fx.config).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace k3::engined
