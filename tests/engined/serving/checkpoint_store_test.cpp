// Turn checkpoints on a disk that fills up: a real 4 MiB tmpfs (root only).
#include "engined/serving/checkpoint_store.h"

#include <sys/mount.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "tests/test_util.h"

namespace k3::engined {
namespace {

namespace fs = std::filesystem;

// A small tmpfs mounted for the test, unmounted after it.
class SmallDisk {
 public:
  explicit SmallDisk(const std::string& dir) : dir_(dir) {
    fs::create_directories(dir);
    mounted_ = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=4m") == 0;
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

SequenceState state_at(const checkpoint::ModelConfig& c, int64_t pos) {
  SequenceState s(c);
  s.position = pos;
  for (size_t l = 0; l < s.mla.size(); ++l) {
    if (c.is_kda(static_cast<int64_t>(l))) continue;
    s.mla[l].ckv.assign(static_cast<size_t>(pos * c.kv_lora_rank), 0.5f);
    s.mla[l].k_r.assign(static_cast<size_t>(pos * c.qk_rope_head_dim), 0.25f);
  }
  return s;
}

TEST(CheckpointStore, AFullDiskEvictsTheLeastRecentlyUsedNotTheNew) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  testing::TempDir tmp;
  SmallDisk disk(tmp.file("ckpt"));
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here";
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  ASSERT_TRUE(c.ok());
  const std::vector<float> logits(static_cast<size_t>(c->vocab_size), 1.0f);
  const SequenceState s = state_at(*c, 64);
  const uint64_t one = s.bytes() + logits.size() * 4;
  ASSERT_GT(one, 300000u) << "the test wants states of a few hundred KB";
  // A budget far above what the disk holds: the disk is the bound.
  auto store = CheckpointStore::open({one * 1000, tmp.file("ckpt")}, *c, 42);
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<int32_t> tokens(64);
  for (int i = 0; i < 30; ++i) {
    for (int t = 0; t < 64; ++t) tokens[static_cast<size_t>(t)] = i * 100 + t;
    ASSERT_TRUE((*store)->save(tokens, 64, s, logits).ok()) << "save " << i;
    ASSERT_TRUE((*store)->has(tokens, 64)) << "the new checkpoint is kept";
    // Keep checkpoint 0 in use: least recently used order, not age, decides.
    std::vector<int32_t> first(64);
    for (int t = 0; t < 64; ++t) first[static_cast<size_t>(t)] = t;
    first.push_back(7);
    EXPECT_EQ((*store)->restore_deepest(first, 0).tokens, 64) << "save " << i;
  }
  EXPECT_EQ((*store)->failed_saves(), 0u);
  EXPECT_GT((*store)->evicted_for_space(), 0u);
  EXPECT_LT((*store)->size(), 30u);
  struct statvfs st;
  ASSERT_EQ(::statvfs(tmp.file("ckpt").c_str(), &st), 0);
  EXPECT_GT(st.f_bavail, 0u);
  // Files on disk are exactly the entries held.
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(tmp.file("ckpt")))
    files += e.path().extension() == ".k3s";
  EXPECT_EQ(files, (*store)->size());
  // The oldest unused (1, 2, ...) went; 0, used all along, is still there.
  std::vector<int32_t> t0(64), t1(64);
  for (int t = 0; t < 64; ++t) {
    t0[static_cast<size_t>(t)] = t;
    t1[static_cast<size_t>(t)] = 100 + t;
  }
  EXPECT_TRUE((*store)->has(t0, 64));
  EXPECT_FALSE((*store)->has(t1, 64));
}

TEST(CheckpointStore, AStateLargerThanTheDiskFailsOnceAndIsCounted) {
  if (::geteuid() != 0) GTEST_SKIP() << "mounting a tmpfs needs root";
  testing::TempDir tmp;
  SmallDisk disk(tmp.file("ckpt"));
  if (!disk.mounted()) GTEST_SKIP() << "cannot mount a tmpfs here";
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  const std::vector<float> logits(static_cast<size_t>(c->vocab_size), 1.0f);
  const SequenceState big = state_at(*c, 16384);  // more than 4 MiB
  ASSERT_GT(big.bytes(), 4u << 20);
  auto store = CheckpointStore::open({big.bytes() * 10, tmp.file("ckpt")}, *c, 42);
  ASSERT_TRUE(store.ok());
  std::vector<int32_t> tokens(16384, 5);
  for (int i = 0; i < 3; ++i) {
    tokens[0] = i;
    EXPECT_FALSE((*store)->save(tokens, 16384, big, logits).ok());
  }
  EXPECT_EQ((*store)->failed_saves(), 3u);
  EXPECT_EQ((*store)->size(), 0u);
  for (const auto& e : fs::directory_iterator(tmp.file("ckpt")))
    ADD_FAILURE() << "left behind: " << e.path();
}

}  // namespace
}  // namespace k3::engined
