// API keys: the key file's rules and errors, and the bearer check (right key,
// wrong key, prefix, suffix, empty, wrong scheme).
#include "gateway/core/api_keys.h"

#include <sys/stat.h>
#include <sys/types.h>

#include <filesystem>
#include <fstream>

#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace k3::gateway {
namespace {

constexpr std::string_view kKeyA = "sk-k3-aaaaaaaaaaaaaaaa";
constexpr std::string_view kKeyB = "sk-k3-bbbbbbbbbbbbbbbbbbbbbbbb";

// A keys file as deployed: the service's group may read it, others not.
std::string write_file(const k3::testing::TempDir& dir, const std::string& text,
                       std::filesystem::perms mode = std::filesystem::perms(0640)) {
  const std::string path = dir.file("keys");
  std::ofstream(path, std::ios::binary) << text;
  std::filesystem::permissions(path, mode);
  return path;
}

TEST(ApiKeys, DisabledByDefault) {
  ApiKeys keys;
  EXPECT_FALSE(keys.enabled());
  EXPECT_FALSE(keys.check_bearer(cat("Bearer ", kKeyA)));
}

TEST(ApiKeys, BearerCheck) {
  ApiKeys keys;
  ASSERT_TRUE(keys.add_key(kKeyA).ok());
  ASSERT_TRUE(keys.add_key(kKeyB).ok());
  EXPECT_TRUE(keys.enabled());
  EXPECT_TRUE(keys.check_bearer(cat("Bearer ", kKeyA)));
  EXPECT_TRUE(keys.check_bearer(cat("Bearer ", kKeyB)));
  EXPECT_TRUE(keys.check_bearer(cat("bearer ", kKeyA)));
  EXPECT_TRUE(keys.check_bearer(cat("BEARER ", kKeyB)));
  // Wrong key, a prefix, the key with a suffix, one byte changed.
  EXPECT_FALSE(keys.check_bearer("Bearer sk-k3-cccccccccccccccc"));
  EXPECT_FALSE(keys.check_bearer(cat("Bearer ", kKeyA.substr(0, kKeyA.size() - 1))));
  EXPECT_FALSE(keys.check_bearer(cat("Bearer ", kKeyA, "x")));
  EXPECT_FALSE(keys.check_bearer(cat("Bearer ", kKeyA, " ")));
  std::string changed(kKeyB);
  changed[10] = 'c';
  EXPECT_FALSE(keys.check_bearer(cat("Bearer ", changed)));
  // Empty, scheme alone, wrong scheme, two spaces, no space, the bare key.
  EXPECT_FALSE(keys.check_bearer(""));
  EXPECT_FALSE(keys.check_bearer("Bearer"));
  EXPECT_FALSE(keys.check_bearer("Bearer "));
  EXPECT_FALSE(keys.check_bearer(cat("Basic ", kKeyA)));
  EXPECT_FALSE(keys.check_bearer(cat("Token ", kKeyA)));
  EXPECT_FALSE(keys.check_bearer(cat("Bearer  ", kKeyA)));
  EXPECT_FALSE(keys.check_bearer(cat("Bearer", kKeyA)));
  EXPECT_FALSE(keys.check_bearer(kKeyA));
  EXPECT_FALSE(keys.check_bearer(cat("Bearer ", kKeyA, "\0", kKeyB)));
}

TEST(ApiKeys, ShortOrOddKeysRefused) {
  ApiKeys keys;
  const Status s = keys.add_key("short-key", "--api-key");
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(msg(s), "--api-key: a key must be at least 16 characters (this one has 9)");
  EXPECT_FALSE(keys.add_key("sk-k3-with space-inside").ok());
  EXPECT_FALSE(keys.add_key("sk-k3-\x01"
                            "aaaaaaaaaaaaaaa")
                   .ok());
  EXPECT_FALSE(keys.enabled());
}

TEST(ApiKeys, File) {
  k3::testing::TempDir dir;
  const std::string path = write_file(
      dir, cat("# keys for the gateway\n\n  ", kKeyA, "  \r\n\t# indented comment\n", kKeyB));
  ApiKeys keys;
  const Status s = keys.add_file(path);
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(keys.size(), 2u);
  EXPECT_TRUE(keys.check_bearer(cat("Bearer ", kKeyA)));
  EXPECT_TRUE(keys.check_bearer(cat("Bearer ", kKeyB)));
  // A file and a list together.
  ASSERT_TRUE(keys.add_key("sk-k3-from-the-command-line").ok());
  EXPECT_TRUE(keys.check_bearer("Bearer sk-k3-from-the-command-line"));
}

TEST(ApiKeys, FileErrorsNameFileAndLine) {
  k3::testing::TempDir dir;
  ApiKeys keys;
  const std::string missing = dir.file("nope");
  Status s = keys.add_file(missing);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(msg(s).find(missing), std::string::npos) << s;
  EXPECT_NE(msg(s).find("cannot open"), std::string::npos) << s;

  s = keys.add_file(dir.path());  // a directory
  EXPECT_FALSE(s.ok());
  EXPECT_NE(msg(s).find(dir.path()), std::string::npos) << s;

  const std::string empty = write_file(dir, "# only a comment\n\n");
  s = keys.add_file(empty);
  EXPECT_FALSE(s.ok());
  EXPECT_NE(msg(s).find(empty), std::string::npos) << s;
  EXPECT_NE(msg(s).find("no keys"), std::string::npos) << s;

  const std::string short_key = write_file(dir, cat(kKeyA, "\n# c\ntooshort\n"));
  s = keys.add_file(short_key);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(msg(s), cat("api key file ", short_key,
                        " line 3: a key must be at least 16 characters (this one has 8)"));
  // The key itself never appears in a message.
  EXPECT_EQ(msg(s).find("tooshort"), std::string::npos);
}

TEST(ApiKeys, FileReadableByOtherUsersIsRefused) {
  k3::testing::TempDir dir;
  for (unsigned mode : {0644u, 0604u, 0602u, 0601u}) {
    ApiKeys keys;
    const std::string path = write_file(dir, cat(kKeyA, "\n"), std::filesystem::perms(mode));
    const Status s = keys.add_file(path);
    EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << std::oct << mode;
    EXPECT_NE(msg(s).find(cat("api key file ", path, ": holds secrets")), std::string::npos) << s;
    EXPECT_NE(msg(s).find("chmod 6"), std::string::npos) << s;
    EXPECT_FALSE(keys.check_bearer(cat("Bearer ", kKeyA))) << "no key of a refused file is used";
  }
  for (unsigned mode : {0600u, 0640u, 0400u}) {
    ApiKeys keys;
    const std::string path = write_file(dir, cat(kKeyA, "\n"), std::filesystem::perms(mode));
    EXPECT_TRUE(keys.add_file(path).ok()) << std::oct << mode;
  }
}

TEST(ApiKeys, FifoIsRefusedNotWaitedOn) {
  k3::testing::TempDir dir;
  const std::string fifo = dir.file("keys.fifo");
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  ApiKeys keys;
  const Status s = keys.add_file(fifo);  // before: blocked until a writer came
  EXPECT_FALSE(s.ok());
  EXPECT_NE(msg(s).find("not a regular file"), std::string::npos) << s;
}

}  // namespace
}  // namespace k3::gateway
