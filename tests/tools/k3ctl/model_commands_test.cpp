// k3ctl inspect as a real process on copies of the tiny model: a snapshot
// without its vision shards is accepted with a warning and refused under
// --strict; a missing text shard fails, naming the shard and a tensor.
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

}  // namespace
}  // namespace k3
