// Creating expertd's segment reports progress while it reserves the pages;
// opening one refuses a segment another local user made or widened.
#include "shared/shm/segment.h"

#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace k3::shm {
namespace {

TEST(Segment, CreateReportsReservingProgress) {
  const std::string name = "k3test-progress-" + std::to_string(::getpid());
  ::testing::internal::CaptureStderr();
  auto seg = Segment::create(name, 300ull << 20);  // two 256 MiB steps
  const std::string err = ::testing::internal::GetCapturedStderr();
  Segment::remove(name);
  ASSERT_TRUE(seg.ok()) << seg.status();
  EXPECT_EQ(seg->size(), 300ull << 20);
  EXPECT_NE(err.find("segment /dev/shm/" + name + ": 100.0% (314.6 MB of 314.6 MB"),
            std::string::npos)
      << err;
}

// A squatter: another uid (setpriv, as `nobody`) creates the service's
// segment name first, readable and writable by all, with its own bytes.
TEST(Segment, AnotherUsersSegmentIsRefusedNamingOwnerAndMode) {
  ASSERT_EQ(::geteuid(), 0u) << "this test needs root to run a process as another uid";
  const std::string name = "k3test-squat-" + std::to_string(::getpid());
  auto r = testing::run_command(
      {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", "/bin/sh", "-c",
       "umask 0; head -c 65536 /dev/zero > /dev/shm/" + name + " && chmod 0666 /dev/shm/" + name});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto seg = Segment::open(name);
  Segment::remove(name);
  ASSERT_FALSE(seg.ok());
  EXPECT_EQ(seg.status().code(), absl::StatusCode::kPermissionDenied);
  const std::string m(seg.status().message());
  EXPECT_NE(m.find("/dev/shm/" + name + " belongs to uid 65534 (mode 0666)"), std::string::npos)
      << m;
}

TEST(Segment, OursIsRefusedOnceWidenedAndAPathSegmentThroughASymlinkToo) {
  const std::string name = "k3test-wide-" + std::to_string(::getpid());
  {
    auto seg = Segment::create(name, 1 << 20, 0660);
    ASSERT_TRUE(seg.ok()) << seg.status();
    EXPECT_TRUE(Segment::open(name).ok());
  }
  ASSERT_EQ(::chmod(("/dev/shm/" + name).c_str(), 0666), 0);
  auto wide = Segment::open(name);
  Segment::remove(name);
  ASSERT_FALSE(wide.ok());
  EXPECT_NE(wide.status().message().find("has mode 0666, wider than expertd sets"),
            std::string::npos)
      << wide.status();

  testing::TempDir tmp;
  const std::string path = tmp.file("seg");
  ASSERT_TRUE(Segment::create(path, 1 << 20).ok());
  EXPECT_TRUE(Segment::open(path).ok());
  ASSERT_EQ(::symlink(path.c_str(), tmp.file("link").c_str()), 0);
  auto linked = Segment::open(tmp.file("link"));
  ASSERT_FALSE(linked.ok());
  EXPECT_NE(linked.status().message().find("cannot open segment"), std::string::npos)
      << linked.status();
  // A file of another user in a directory we share.
  ASSERT_EQ(::chown(path.c_str(), 65534, 65534), 0);
  auto theirs = Segment::open(path);
  ASSERT_FALSE(theirs.ok());
  EXPECT_NE(theirs.status().message().find("belongs to uid 65534"), std::string::npos)
      << theirs.status();
}

}  // namespace
}  // namespace k3::shm
