// Reading files we did not write: only regular files (a FIFO is refused at
// once, never waited on), within a size cap; secrets only when other users
// cannot read them, the mode being that of the file opened.
#include "shared/base/file.h"

#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/test_util.h"

namespace k3::base {
namespace {

namespace fs = std::filesystem;

std::string write(const testing::TempDir& dir, const std::string& name, const std::string& text,
                  unsigned mode) {
  const std::string path = dir.file(name);
  std::ofstream(path, std::ios::binary) << text;
  fs::permissions(path, fs::perms(mode));
  return path;
}

TEST(ReadSmallFile, RegularFilesWithinTheCap) {
  testing::TempDir dir;
  const std::string path = write(dir, "config.json", "{\"a\": 1}", 0644);
  auto text = read_small_file(path);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "{\"a\": 1}");
  auto capped = read_small_file(path, 4);
  EXPECT_EQ(capped.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(msg(capped.status()).find("larger than the limit of 4"), std::string::npos);
}

TEST(ReadSmallFile, FifoAndDirectoryAreRefusedAtOnce) {
  testing::TempDir dir;
  const std::string fifo = dir.file("topology.json");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  // Before: open() waited for a writer, and the gateway never started.
  auto text = read_small_file(fifo);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(msg(text.status()), fifo + ": not a regular file");
  EXPECT_EQ(msg(read_small_file(dir.path()).status()), dir.path() + ": not a regular file");
}

TEST(ReadSecretFile, RefusedWhenTheModeHasAForbiddenBit) {
  testing::TempDir dir;
  const std::string path = write(dir, "token", "secret\n", 0644);
  auto text = read_secret_file(path, S_IRWXG | S_IRWXO);
  EXPECT_EQ(text.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(msg(text.status()),
            path +
                ": holds secrets but its mode is 0644 (readable by its group or "
                "others); chmod 600 it");
  text = read_secret_file(path, S_IRWXO);
  EXPECT_EQ(msg(text.status()),
            path + ": holds secrets but its mode is 0644 (readable by others); chmod 640 it");
  fs::permissions(path, fs::perms(0640));
  text = read_secret_file(path, S_IRWXO);
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_EQ(*text, "secret\n");
}

TEST(ReadSecretFile, TheModeOfTheFileASymlinkNames) {
  testing::TempDir dir;
  const std::string target = write(dir, "keys", "secret\n", 0644);
  const std::string link = dir.file("keys.link");
  fs::create_symlink(target, link);  // a symlink's own mode is 0777; the file's counts
  EXPECT_EQ(read_secret_file(link, S_IRWXO).status().code(), absl::StatusCode::kPermissionDenied);
  fs::permissions(target, fs::perms(0600));
  EXPECT_TRUE(read_secret_file(link, S_IRWXO).ok());
}

}  // namespace
}  // namespace k3::base

namespace k3::base {
namespace {

// A link planted where a file is created cannot redirect the write; the mode
// asked is the mode given, whatever the umask.
TEST(FileCreate, RefusesAnExistingPathOrSymlinkAndSetsTheModeExactly) {
  testing::TempDir tmp;
  const std::string target = tmp.file("victim");
  testing::write_file(target, "keep");
  ASSERT_EQ(::symlink(target.c_str(), tmp.file("link").c_str()), 0);
  EXPECT_FALSE(File::create(tmp.file("link"), 0600).ok());
  EXPECT_FALSE(File::create(target, 0600).ok());
  EXPECT_EQ(testing::read_file(target), "keep");
  const mode_t old = ::umask(0077);
  auto f = File::create(tmp.file("new"), 0640);
  ::umask(old);
  ASSERT_TRUE(f.ok()) << f.status();
  struct stat st {};
  ASSERT_EQ(::stat(tmp.file("new").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0640u);
}

}  // namespace
}  // namespace k3::base
