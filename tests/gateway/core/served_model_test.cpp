// gateway/core/served_model.h: a K3 checkpoint is recognised from its
// config.json and served as kimi-k3; other models by their directory's
// name; the advertised context is the smaller of engined's and the model's.
#include "gateway/core/served_model.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/test_util.h"

namespace k3::gateway {
namespace {

// A model directory DIR/NAME holding `config` as config.json ("" for none).
std::string model_dir(const testing::TempDir& tmp, const std::string& name,
                      const std::string& config) {
  const std::string dir = tmp.file(name);
  std::filesystem::create_directories(dir);
  if (!config.empty()) testing::write_file(dir + "/config.json", config);
  return dir;
}

TEST(ServedModel, AK3CheckpointIsServedAsKimiK3) {
  testing::TempDir tmp;
  for (const char* config :
       {R"({"model_type": "kimi_k3"})",
        R"({"architectures": ["KimiK3ForConditionalGeneration"], "model_type": "other"})"}) {
    const std::string dir = model_dir(tmp, "model", config);
    auto id = read_model_identity(dir);
    ASSERT_TRUE(id.ok()) << id.status();
    EXPECT_TRUE(id->is_k3) << config;
    EXPECT_EQ(default_served_name(dir, *id), "kimi-k3");
  }
  // The tiny test model is laid out as the published checkpoint.
  auto tiny = read_model_identity(testing::tiny_model_dir());
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_TRUE(tiny->is_k3);
}

TEST(ServedModel, OtherModelsAreServedByTheirDirectorysName) {
  testing::TempDir tmp;
  const std::string dir = model_dir(tmp, "my-model", R"({"model_type": "deepseek_v3"})");
  auto id = read_model_identity(dir);
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_FALSE(id->is_k3);
  EXPECT_EQ(default_served_name(dir, *id), "my-model");
  EXPECT_EQ(default_served_name(dir + "/", *id), "my-model");
  EXPECT_EQ(default_served_name("/", *id), "k3");
  // No config.json: not K3, no limit.
  const std::string bare = model_dir(tmp, "bare", "");
  auto none = read_model_identity(bare);
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_FALSE(none->is_k3);
  EXPECT_EQ(none->context_limit, 0);
}

TEST(ServedModel, ContextLimitFromConfigAndTheSmallerWins) {
  testing::TempDir tmp;
  auto top = read_model_identity(model_dir(tmp, "a", R"({"max_position_embeddings": 4096})"));
  ASSERT_TRUE(top.ok());
  EXPECT_EQ(top->context_limit, 4096);
  auto nested = read_model_identity(
      model_dir(tmp, "b", R"({"text_config": {"max_position_embeddings": 262144}})"));
  ASSERT_TRUE(nested.ok());
  EXPECT_EQ(nested->context_limit, 262144);
  auto bad = read_model_identity(model_dir(tmp, "c", R"({"max_position_embeddings": "long"})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(msg(bad.status()).find("max_position_embeddings"), std::string::npos);
  auto not_json = read_model_identity(model_dir(tmp, "d", "[1"));
  ASSERT_FALSE(not_json.ok());
  EXPECT_NE(msg(not_json.status()).find("config.json"), std::string::npos) << not_json.status();

  EXPECT_EQ(effective_context(131072, 262144), 131072);
  EXPECT_EQ(effective_context(131072, 4096), 4096);
  EXPECT_EQ(effective_context(131072, 0), 131072);
  EXPECT_EQ(effective_context(0, 4096), 4096);
  EXPECT_EQ(effective_context(0, 0), 0);
}

}  // namespace
}  // namespace k3::gateway
