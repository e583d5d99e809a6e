// ShardSet: what one expertd serves, on copies of the tiny model.
#include "expertd/shard_set.h"

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/test_util.h"

namespace k3::expertd {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

// Issue 24: a snapshot without its vision shards serves every expert, the
// missing shards listed for expertd's warning. A drive owns its shards, so a
// missing text shard is not an error here: its experts are simply not served
// (engined and the k3ctl commands, which need them, fail naming it).
TEST(ShardSet, SnapshotWithoutItsVisionShards) {
  TempDir tmp;
  const std::string model = tmp.file("model");
  fs::copy(testing::tiny_model_dir(), model, fs::copy_options::recursive);
  fs::remove(model + "/model-00004-of-00005.safetensors");
  fs::remove(model + "/model-00005-of-00005.safetensors");
  auto s = ShardSet::open(model, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->index().present_count(), (*s)->index().total_count());
  ASSERT_EQ((*s)->checkpoint().missing_shard_warnings().size(), 2u);
  EXPECT_EQ((*s)->checkpoint().missing_shard_warnings()[1],
            "shard model-00005-of-00005.safetensors named by the index is missing; its 5 "
            "tensor(s) are not used by the model (vision_tower.encoder.blocks.0.norm0.weight, "
            "vision_tower.encoder.blocks.0.wo.weight, vision_tower.encoder.blocks.0.wqkv.weight, "
            "...)");

  fs::remove(model + "/model-00003-of-00005.safetensors");
  s = ShardSet::open(model, {});
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_LT((*s)->index().present_count(), (*s)->index().total_count());
  EXPECT_FALSE((*s)->owns(5, 0)) << "layer 5's experts were in the removed shard";
  EXPECT_EQ((*s)->checkpoint().missing_shard_warnings().size(), 2u)
      << "a missing text shard is not one of the vision tower's";
}

}  // namespace
}  // namespace k3::expertd
