// Progress off a terminal (stderr captured to a file): log lines with the
// percentage, amounts and ETA, no bar and no carriage return.
#include "shared/base/progress.h"

#include <cstdlib>
#include <sstream>
#include <thread>

#include <gtest/gtest.h>

namespace k3 {
namespace {

TEST(Progress, OffATerminalPrintsLogLinesEveryIntervalAndAFinalOne) {
  ::setenv("K3_PROGRESS_LOG_SECONDS", "0.02", 1);
  ::testing::internal::CaptureStderr();
  {
    base::Progress p("copy", 4000000);
    for (int i = 0; i < 4; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(30));
      p.advance(1000000);
    }
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  ::unsetenv("K3_PROGRESS_LOG_SECONDS");
  std::istringstream in(err);
  int lines = 0;
  for (std::string line; std::getline(in, line);) {
    ++lines;
    EXPECT_EQ(line.rfind("copy: ", 0), 0u) << line;
    EXPECT_NE(line.find(" MB of 4.0 MB"), std::string::npos) << line;
    EXPECT_NE(line.find(", ETA "), std::string::npos) << line;
    EXPECT_EQ(line.find('['), std::string::npos) << line;
  }
  EXPECT_EQ(err.find('\r'), std::string::npos);
  EXPECT_GE(lines, 4) << err;  // three on the interval at least, and the last
  EXPECT_NE(err.find("copy: 100.0% (4.0 MB of 4.0 MB"), std::string::npos) << err;
}

TEST(Progress, ABadIntervalIsNamedAndTheDefaultUsed) {
  ::setenv("K3_PROGRESS_LOG_SECONDS", "soon", 1);
  ::testing::internal::CaptureStderr();
  {
    base::Progress p("x", 10, "files");
    p.advance(10);
  }
  const std::string err = ::testing::internal::GetCapturedStderr();
  ::unsetenv("K3_PROGRESS_LOG_SECONDS");
  EXPECT_NE(err.find("K3_PROGRESS_LOG_SECONDS='soon' is not a number"), std::string::npos) << err;
  EXPECT_NE(err.find("x: 100.0% (10 files of 10 files)"), std::string::npos) << err;
}

TEST(Progress, QuietPrintsNothing) {
  ::testing::internal::CaptureStderr();
  {
    base::Progress p("q", 10, "B", /*quiet=*/true);
    p.advance(10);
  }
  EXPECT_EQ(::testing::internal::GetCapturedStderr(), "");
}

}  // namespace
}  // namespace k3
