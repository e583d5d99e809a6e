// Creating expertd's segment reports progress while it reserves the pages.
#include "shared/shm/segment.h"

#include <unistd.h>

#include <string>

#include <gtest/gtest.h>

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

}  // namespace
}  // namespace k3::shm
