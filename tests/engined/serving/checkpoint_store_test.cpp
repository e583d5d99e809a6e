// Turn checkpoints on a disk that fills up: a real 4 MiB tmpfs (root only).
#include "engined/serving/checkpoint_store.h"

#include <sys/mount.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "tests/test_util.h"

namespace k3::engined {
namespace {

namespace fs = std::filesystem;

// A small tmpfs mounted for the test, unmounted after it.
class SmallDisk {
 public:
  explicit SmallDisk(const std::string& dir) : dir_(dir) {
    fs::create_directories(dir);
    mounted_ = ::mount("tmpfs", dir.c_str(), "tmpfs", 0, "size=4m,mode=0700") == 0;
  }
  ~SmallDisk() {
    if (mounted_) ::umount2(dir_.c_str(), MNT_DETACH);
  }
  bool mounted() const { return mounted_; }

 private:
  std::string dir_;
  bool mounted_ = false;
};

CheckpointOptions files_only(const std::string& dir, uint64_t disk_bytes) {
  CheckpointOptions o;
  o.dir = dir;
  o.disk_budget_bytes = disk_bytes;
  return o;
}

// Tokens i*100 .. i*100+63.
std::vector<int32_t> t_of(int i) {
  std::vector<int32_t> t(64);
  for (int k = 0; k < 64; ++k) t[static_cast<size_t>(k)] = i * 100 + k;
  return t;
}

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
  auto store = CheckpointStore::open(files_only(tmp.file("ckpt"), one * 1000), *c, 42, 4);
  ASSERT_TRUE(store.ok()) << store.status();
  std::vector<int32_t> tokens(64);
  for (int i = 0; i < 30; ++i) {
    for (int t = 0; t < 64; ++t) tokens[static_cast<size_t>(t)] = i * 100 + t;
    ASSERT_TRUE((*store)->save(tokens, 64, s, logits).ok()) << "save " << i;
    (*store)->wait_writes();
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
  (*store)->wait_writes();
  (*store)->has(t_of(0), 64);  // takes the writes' outcomes in
  size_t files = 0;
  for (const auto& e : fs::directory_iterator(tmp.file("ckpt")))
    files += e.path().extension() == ".k3snap";
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
  auto store = CheckpointStore::open(files_only(tmp.file("ckpt"), big.bytes() * 10), *c, 42, 4);
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

// Files of the store's directory, by extension.
size_t count_files(const std::string& dir, const std::string& ext = ".k3snap") {
  size_t n = 0;
  for (const auto& e : fs::directory_iterator(dir)) n += e.path().extension() == ext;
  return n;
}

std::vector<int32_t> extended(std::vector<int32_t> t) {
  t.push_back(9999);
  return t;
}

// An entry evicted from RAM is still restored, from its file; the RAM tier
// keeps within --checkpoint-mb and the disk tier within its own budget.
TEST(CheckpointStore, TwoTiersEvictFromRamToTheDisk) {
  testing::TempDir tmp;
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  ASSERT_TRUE(c.ok());
  std::vector<float> logits(static_cast<size_t>(c->vocab_size), 1.0f);
  const SequenceState s = state_at(*c, 64);
  const uint64_t one = s.bytes() + logits.size() * 4;
  CheckpointOptions o = files_only(tmp.file("ckpt"), 3 * snapshot_file_bytes(*c, 64));
  o.budget_bytes = one + one / 2;  // one state in RAM
  auto store = CheckpointStore::open(o, *c, 42, 4);
  ASSERT_TRUE(store.ok()) << store.status();
  for (int i = 0; i < 4; ++i) {
    logits[0] = static_cast<float>(i);
    ASSERT_TRUE((*store)->save(t_of(i), 64, s, logits).ok());
    (*store)->wait_writes();
    EXPECT_LE((*store)->bytes(), o.budget_bytes);
    EXPECT_LE((*store)->disk_bytes(), o.disk_budget_bytes);
  }
  EXPECT_EQ((*store)->bytes(), one);
  EXPECT_EQ(count_files(tmp.file("ckpt")), 3u);  // the oldest file went
  EXPECT_EQ((*store)->restore_deepest(extended(t_of(0)), 0).tokens, 0);
  // 1 is only on disk now: restored from its file, with its own logits.
  RestoredState r = (*store)->restore_deepest(extended(t_of(1)), 0);
  ASSERT_EQ(r.tokens, 64);
  EXPECT_EQ(r.logits[0], 1.0f);
  EXPECT_EQ(r.state->position, 64);
  EXPECT_EQ((*store)->restore_deepest(extended(t_of(3)), 0).logits[0], 3.0f);
  EXPECT_EQ((*store)->writes_dropped(), 0u);
  EXPECT_EQ((*store)->failed_saves(), 0u);
}

// Files survive the store (engined restarting): a new store on the same
// directory indexes them; a corrupt header, the former format and stale
// temporaries are removed; files of another model are left alone; a payload
// byte flipped is refused at restore and the next deepest is used.
TEST(CheckpointStore, FilesSurviveARestartAndAreValidatedNotWiped) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("ckpt");
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  ASSERT_TRUE(c.ok());
  std::vector<float> logits(static_cast<size_t>(c->vocab_size), 2.0f);
  std::vector<int32_t> deep = t_of(0);
  for (int k = 0; k < 16; ++k) deep.push_back(k);
  {
    auto store = CheckpointStore::open(files_only(dir, 1ull << 30), *c, 42, 4);
    ASSERT_TRUE(store.ok());
    // One at a time: a queue of two may drop a third (files only: the
    // save then fails).
    ASSERT_TRUE((*store)->save(deep, 64, state_at(*c, 64), logits).ok());
    (*store)->wait_writes();
    ASSERT_TRUE((*store)->save(deep, 80, state_at(*c, 80), logits).ok());
    (*store)->wait_writes();
    ASSERT_TRUE((*store)->save(t_of(5), 64, state_at(*c, 64), logits).ok());
  }  // the queued write finishes
  ASSERT_EQ(count_files(dir), 3u);
  // Another model's file and the former format's.
  const std::vector<int32_t> theirs = t_of(7);
  const SnapshotIdentity other{43, 4, 1.0f};
  ASSERT_TRUE(write_snapshot_file((fs::path(dir) / snapshot_file_name(other, theirs)).string(),
                                  other, theirs, state_at(*c, 64), logits)
                  .ok());
  std::ofstream(fs::path(dir) / "ckpt-3.k3s") << "old";
  // t_of(5)'s header corrupted: refused at open.
  const std::string five = (fs::path(dir) / snapshot_file_name({42, 4, 1.0f}, t_of(5))).string();
  {
    std::fstream f(five, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('\x7f');
  }
  // The deepest one's payload: refused when restored.
  const std::vector<int32_t> deep80(deep.begin(), deep.begin() + 80);
  const std::string d80 = (fs::path(dir) / snapshot_file_name({42, 4, 1.0f}, deep80)).string();
  {
    std::fstream f(d80, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(5000);
    const char b = static_cast<char>(f.get());
    f.seekp(5000);
    f.put(static_cast<char>(b ^ 0x20));
  }
  auto store = CheckpointStore::open(files_only(dir, 1ull << 30), *c, 42, 4);
  ASSERT_TRUE(store.ok());
  EXPECT_EQ((*store)->size(), 2u);  // deep@64, deep@80
  EXPECT_EQ((*store)->files_refused(), 1u);
  EXPECT_FALSE(fs::exists(five));
  EXPECT_FALSE(fs::exists(fs::path(dir) / "ckpt-3.k3s"));
  EXPECT_TRUE(fs::exists(fs::path(dir) / snapshot_file_name(other, theirs)));
  // Other dense bits: nothing of ours.
  {
    auto eight = CheckpointStore::open(files_only(dir, 1ull << 30), *c, 42, 8);
    ASSERT_TRUE(eight.ok());
    EXPECT_EQ((*eight)->size(), 0u);
  }
  auto prompt = deep;
  prompt.push_back(1);
  RestoredState r = (*store)->restore_deepest(prompt, 0);
  EXPECT_EQ(r.tokens, 64) << "the corrupt 80 is refused, 64 used";
  EXPECT_EQ((*store)->files_refused(), 2u);
  EXPECT_FALSE(fs::exists(d80));
  EXPECT_EQ(r.logits, logits);
}

// A file another engined removed (a shared directory) is a miss, not an
// error.
TEST(CheckpointStore, AFileThatVanishesIsAMiss) {
  testing::TempDir tmp;
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  ASSERT_TRUE(c.ok());
  const std::vector<float> logits(static_cast<size_t>(c->vocab_size), 1.0f);
  auto store = CheckpointStore::open(files_only(tmp.file("ckpt"), 1ull << 30), *c, 42, 4);
  ASSERT_TRUE(store.ok());
  ASSERT_TRUE((*store)->save(t_of(1), 64, state_at(*c, 64), logits).ok());
  (*store)->wait_writes();
  for (const auto& e : fs::directory_iterator(tmp.file("ckpt"))) fs::remove(e.path());
  EXPECT_EQ((*store)->restore_deepest(extended(t_of(1)), 0).tokens, 0);
  EXPECT_EQ((*store)->files_refused(), 0u);
  EXPECT_EQ((*store)->size(), 0u);
}

// Two engined processes on one directory: each writes through its own
// temporary, so saving the same state at once leaves one valid file and no
// temporary; each sees the other's files at its next start; a stale
// temporary (a crashed writer's, over an hour old) is removed at start, a
// fresh one (a live writer's) is left alone.
TEST(CheckpointStore, ADirectorySharedByTwoStoresIsSafe) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("ckpt");
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  ASSERT_TRUE(c.ok());
  const std::vector<float> logits(static_cast<size_t>(c->vocab_size), 3.0f);
  const SequenceState s = state_at(*c, 64);
  auto a = CheckpointStore::open(files_only(dir, 1ull << 30), *c, 42, 4);
  auto b = CheckpointStore::open(files_only(dir, 1ull << 30), *c, 42, 4);
  ASSERT_TRUE(a.ok() && b.ok());
  for (int round = 0; round < 5; ++round) {
    ASSERT_TRUE((*a)->save(t_of(round), 64, s, logits).ok());
    ASSERT_TRUE((*b)->save(t_of(round), 64, s, logits).ok());
    (*a)->wait_writes();
    (*b)->wait_writes();
  }
  EXPECT_EQ(count_files(dir), 5u);
  for (const auto& e : fs::directory_iterator(dir))
    EXPECT_FALSE(is_snapshot_temp_name(e.path().filename().string())) << e.path();
  // Temporaries: one a crashed writer left two hours ago, one being written.
  const std::string stale =
      (fs::path(dir) / ".snap-0123456789abcdef0123456789abcdef.k3snap.tmp.1.0").string();
  const std::string live =
      (fs::path(dir) / ".snap-0123456789abcdef0123456789abcdef.k3snap.tmp.2.0").string();
  std::ofstream(stale) << "partial";
  std::ofstream(live) << "partial";
  fs::last_write_time(stale, fs::file_time_type::clock::now() - std::chrono::hours(2));
  auto later = CheckpointStore::open(files_only(dir, 1ull << 30), *c, 42, 4);
  ASSERT_TRUE(later.ok());
  EXPECT_EQ((*later)->size(), 5u);
  EXPECT_FALSE(fs::exists(stale));
  EXPECT_TRUE(fs::exists(live));
  EXPECT_EQ((*later)->restore_deepest(extended(t_of(3)), 0).logits, logits);
  // a evicts (removes) a file: for b it is a miss.
  for (const auto& e : fs::directory_iterator(dir))
    if (is_snapshot_file_name(e.path().filename().string())) fs::remove(e.path());
  EXPECT_EQ((*b)->restore_deepest(extended(t_of(2)), 0).tokens, 0);
  EXPECT_EQ((*b)->files_refused(), 0u);
}

}  // namespace
}  // namespace k3::engined

namespace k3::engined {
namespace {

// Conversation states are the service's alone (issue 29, item 7): the
// directory it makes is 0700 whatever the umask, files are 0600, a directory
// other users can write to (or that is theirs) is refused, and a symlink
// named like a snapshot is never followed.
TEST(CheckpointStore, StateFilesAreTheServicesAlone) {
  testing::TempDir tmp;
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  ASSERT_TRUE(c.ok());
  std::vector<float> logits(static_cast<size_t>(c->vocab_size), 2.0f);
  const std::string dir = tmp.file("made/here");
  const mode_t old_umask = ::umask(0);
  {
    auto store = CheckpointStore::open(files_only(dir, 1ull << 30), *c, 42, 4);
    ::umask(old_umask);
    ASSERT_TRUE(store.ok()) << store.status();
    ASSERT_TRUE((*store)->save(t_of(1), 64, state_at(*c, 64), logits).ok());
    (*store)->wait_writes();
  }
  ::umask(old_umask);
  struct stat st {};
  ASSERT_EQ(::stat(dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  const std::string file = (fs::path(dir) / snapshot_file_name({42, 4, 1.0f}, t_of(1))).string();
  ASSERT_EQ(::stat(file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);

  // A symlink in the snapshot's name, to a file of the same bytes elsewhere:
  // refused (and the link removed), the target untouched.
  const std::string elsewhere = tmp.file("elsewhere");
  fs::copy_file(file, elsewhere);
  fs::remove(file);
  ASSERT_EQ(::symlink(elsewhere.c_str(), file.c_str()), 0);
  {
    auto store = CheckpointStore::open(files_only(dir, 1ull << 30), *c, 42, 4);
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ((*store)->size(), 0u);
  }
  EXPECT_TRUE(fs::exists(elsewhere));

  // Writable by every user, or another user's: refused, naming it.
  ASSERT_EQ(::chmod(dir.c_str(), 0777), 0);
  auto open = CheckpointStore::open(files_only(dir, 1ull << 30), *c, 42, 4);
  ASSERT_FALSE(open.ok());
  EXPECT_NE(open.status().message().find("is writable by every user (mode 0777)"),
            std::string::npos)
      << open.status();
  ASSERT_EQ(::chmod(dir.c_str(), 0750), 0);
  EXPECT_TRUE(CheckpointStore::open(files_only(dir, 1ull << 30), *c, 42, 4).ok());
  if (::geteuid() == 0) {
    ASSERT_EQ(::chown(dir.c_str(), 65534, 65534), 0);
    open = CheckpointStore::open(files_only(dir, 1ull << 30), *c, 42, 4);
    ASSERT_FALSE(open.ok());
    EXPECT_NE(open.status().message().find("belongs to uid 65534"), std::string::npos)
        << open.status();
  }
}

}  // namespace
}  // namespace k3::engined
