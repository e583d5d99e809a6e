// k3ctl inspect as a real process on copies of the tiny model: a snapshot
// without its vision shards is accepted with a warning and refused under
// --strict; a missing text shard fails, naming the shard and a tensor. The
// summary (parameters, layers, experts, context, dtypes, sizes) on the tiny
// model and on the published config.json alone.
#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace k3 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::TempDir;

std::string k3ctl() {
  return testing::bin_dir() + "/k3ctl";
}

// The tiny model's shards: three of the text model, the projector's, the tower's.
constexpr const char* kProjector = "model-00004-of-00005.safetensors";
constexpr const char* kTower = "model-00005-of-00005.safetensors";
constexpr const char* kText = "model-00002-of-00005.safetensors";

std::string copy_model(const TempDir& tmp) {
  const std::string dst = tmp.file("model");
  fs::copy(testing::tiny_model_dir(), dst, fs::copy_options::recursive);
  return dst;
}

TEST(Inspect, SnapshotWithoutItsVisionShards) {
  TempDir tmp;
  const std::string model = copy_model(tmp);
  auto full = testing::run_command({k3ctl(), "inspect", "--model", model, "--strict"});
  ASSERT_EQ(full.exit_code, 0) << full.err;
  EXPECT_EQ(json::parse(full.out)["missing_shards"], 0);
  EXPECT_EQ(json::parse(full.out)["shards"], 5);

  fs::remove(model + "/" + kTower);
  auto r = testing::run_command({k3ctl(), "inspect", "--model", model});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);
  EXPECT_EQ(out["missing_shards"], 1);
  EXPECT_EQ(out["shards"], 4);
  EXPECT_EQ(out["layers"], 6);
  EXPECT_CONTAINS(r.err, std::string("k3ctl: warning: ") + model + ": shard " + kTower +
                             " named by the index is missing; its 5 tensor(s) are not used by "
                             "the model (vision_tower.");

  auto strict = testing::run_command({k3ctl(), "inspect", "--model", model, "--strict"});
  EXPECT_NE(strict.exit_code, 0);
  EXPECT_CONTAINS(strict.err, model + ": 1 shard(s) named by the index are missing (" + kTower +
                                  "); they hold only tensors the model does not use (--strict)");

  fs::remove(model + "/" + kProjector);
  r = testing::run_command({k3ctl(), "inspect", "--model", model});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(json::parse(r.out)["missing_shards"], 2);

  fs::remove(model + "/" + kText);
  r = testing::run_command({k3ctl(), "inspect", "--model", model});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_CONTAINS(r.err, std::string("shard ") + kText + " named by the index is missing from " +
                             model + "; it holds tensor 'language_model.model.layers.");
  EXPECT_CONTAINS(r.err, "', which the model uses");
}

// Through a pipe inspect prints its JSON line (scripts and the tests above
// read it); the readable summary has the same figures, which agree with the
// checkpoint's stored bytes.
TEST(Inspect, SummarisesTheTinyModel) {
  auto r = testing::run_command({k3ctl(), "inspect", "--model", testing::tiny_model_dir()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  const uint64_t expert_params = j["expert_parameters"];
  // One MXFP4 weight is half a byte plus a 1-byte scale per 32 weights.
  EXPECT_EQ(expert_params * 17 / 32, j["expert_bytes"].get<uint64_t>());
  const uint64_t moe = j["moe_layers"], experts = j["experts_per_layer"],
                 k = j["experts_per_token"];
  EXPECT_EQ(j["parameters"].get<uint64_t>(),
            j["dense_parameters"].get<uint64_t>() + moe * experts * expert_params);
  EXPECT_EQ(j["active_parameters"].get<uint64_t>(),
            j["dense_parameters"].get<uint64_t>() + moe * k * expert_params);
  EXPECT_EQ(j["expert_bytes_per_token"].get<uint64_t>(),
            moe * k * j["expert_bytes"].get<uint64_t>());
  uint64_t bytes = 0, tensors = 0;
  for (const auto& [dtype, use] : j["dtypes"].items()) {
    bytes += use["bytes"].get<uint64_t>();
    tensors += use["tensors"].get<uint64_t>();
  }
  EXPECT_EQ(bytes, j["total_bytes"].get<uint64_t>());
  EXPECT_EQ(tensors, j["tensors"].get<uint64_t>());
  // The tiny model's only U8 tensors are its routed experts.
  EXPECT_EQ(j["dtypes"]["U8"]["bytes"], j["expert_set_bytes"]);
  EXPECT_EQ(j["stored_expert_bytes"], j["expert_set_bytes"]);
  EXPECT_TRUE(j["context_length"].is_null());  // mkmodel writes no max_position_embeddings

  auto text = testing::run_command(
      {k3ctl(), "inspect", "--model", testing::tiny_model_dir(), "--format", "text"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  std::string params = std::to_string(j["parameters"].get<uint64_t>());
  for (int i = static_cast<int>(params.size()) - 3; i > 0; i -= 3)
    params.insert(static_cast<size_t>(i), ",");
  EXPECT_CONTAINS(text.out, "parameters   28.2 M total (" + params + "), ");
  EXPECT_CONTAINS(text.out, " active per token");
  EXPECT_CONTAINS(text.out, "layers       6: 4 KDA + 2 MLA attention; 1 dense FFN + 5 MoE");
  EXPECT_CONTAINS(text.out, "32 routed per MoE layer, top 4, plus 2 shared");
  EXPECT_CONTAINS(text.out, "(52,224 bytes, MXFP4)");
  EXPECT_CONTAINS(text.out, "context      not stated in config.json");
  EXPECT_CONTAINS(text.out, "dtypes       BF16 ");
  EXPECT_CONTAINS(text.out, "U8         960 tensors");
  EXPECT_CONTAINS(text.out, "and 5 shard files");
  EXPECT_EQ(text.out.find('{'), std::string::npos) << text.out;
  // --json is --format json.
  auto forced =
      testing::run_command({k3ctl(), "inspect", "--model", testing::tiny_model_dir(), "--json"});
  EXPECT_EQ(json::parse(forced.out), j);
  auto bad = testing::run_command(
      {k3ctl(), "inspect", "--model", testing::tiny_model_dir(), "--format", "yaml"});
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_CONTAINS(bad.err, "--format");
}

// The published config.json (tests/shared/checkpoint/data) without weights:
// Kimi K3's 2.8 T parameters, 896 experts of 17,547,264 bytes on 92 MoE
// layers, 25.8 GB of experts per token, a 1 M context.
TEST(Inspect, SummarisesThePublishedConfigAlone) {
  TempDir tmp;
  fs::copy_file(testing::source_dir() + "/tests/shared/checkpoint/data/kimi_k3_config.json",
                tmp.file("config.json"));
  auto r = testing::run_command({k3ctl(), "inspect", "--model", tmp.path(), "--config-only"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["config_only"], true);
  EXPECT_EQ(j["layers"], 93);
  EXPECT_EQ(j["moe_layers"], 92);
  EXPECT_EQ(j["experts_per_layer"], 896);
  EXPECT_EQ(j["experts_per_token"], 16);
  EXPECT_EQ(j["expert_bytes"], 17547264);
  EXPECT_EQ(j["expert_bytes_per_token"].get<uint64_t>(), 92ull * 16 * 17547264);
  EXPECT_EQ(j["context_length"], 1048576);
  EXPECT_GT(j["parameters"].get<double>(), 2.7e12);
  EXPECT_LT(j["parameters"].get<double>(), 2.9e12);
  EXPECT_FALSE(j.contains("dtypes"));
  auto text = testing::run_command(
      {k3ctl(), "inspect", "--model", tmp.path(), "--config-only", "--format", "text"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_CONTAINS(text.out, "parameters   2.78 T total");
  EXPECT_CONTAINS(text.out, "layers       93: 69 KDA + 24 MLA attention; 1 dense FFN + 92 MoE");
  EXPECT_CONTAINS(text.out, "896 routed per MoE layer, top 16, plus 2 shared; 17.5 MB each");
  EXPECT_CONTAINS(text.out, "25.8 GB read per decoded token (92 layers x 16)");
  EXPECT_CONTAINS(text.out, "context      1,048,576 tokens");
  EXPECT_CONTAINS(text.out, "stored       config.json only: no weights read");
  // Without --config-only the weights are required.
  auto full = testing::run_command({k3ctl(), "inspect", "--model", tmp.path()});
  EXPECT_NE(full.exit_code, 0);
  EXPECT_FALSE(full.err.empty());
}

// A dense-only container says what it is and that it stores no experts.
TEST(Inspect, SummarisesADenseOnlyContainer) {
  TempDir tmp;
  ASSERT_EQ(testing::run_command({k3ctl(), "repack", "--model", testing::tiny_model_dir(), "--out",
                                  tmp.file("c"), "--dense-only"})
                .exit_code,
            0);
  auto r = testing::run_command({k3ctl(), "inspect", "--model", tmp.file("c"), "--format", "text"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_CONTAINS(r.out, "container    repacked: dense 4, MLA 8, head 8 bits, dense part only");
  EXPECT_CONTAINS(r.out, "parameters   28.2 M total");  // the model's, not what is stored
  EXPECT_CONTAINS(r.out, "I8 ");
  EXPECT_CONTAINS(r.out, " tensors and 1 shard file: no routed experts stored");
}

}  // namespace
}  // namespace k3
