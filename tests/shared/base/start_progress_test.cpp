#include "shared/base/start_progress.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/resource.h>

#include <thread>

#include "tests/notify_socket.h"
#include "tests/test_util.h"

namespace k3::base {
namespace {

double cpu_seconds() {
  rusage ru{};
  ::getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) * 1e-6;
}

// Sets $NOTIFY_SOCKET to `sock` for the test's life.
struct WithNotifySocket {
  explicit WithNotifySocket(const std::string& a) { ::setenv("NOTIFY_SOCKET", a.c_str(), 1); }
  ~WithNotifySocket() { ::unsetenv("NOTIFY_SOCKET"); }
};

StartProgress::Options fast() {
  StartProgress::Options o;
  o.tick_seconds = 0.2;
  o.extend_seconds = 30;
  // 20 ms of CPU in a 200 ms tick: the test's busy loop even with a fifth
  // of a core on a loaded machine, not the ticking thread's own microseconds.
  o.min_cpu_share = 0.1;
  return o;
}

TEST(StartProgress, ExtendsTheTimeoutWhileTheStartUsesCpu) {
  testing::TempDir tmp;
  testing::NotifySocket sock(tmp.file("notify"));
  ASSERT_TRUE(sock.ok());
  WithNotifySocket env(sock.address());
  StartProgress start("loading the model from /m", fast());
  const std::string first = sock.receive(5);
  EXPECT_EQ(first.rfind("STATUS=loading the model from /m (", 0), 0u) << first;
  // Half a second of CPU (however long that takes on a loaded machine).
  const double t0 = cpu_seconds();
  volatile uint64_t x = 0;
  while (cpu_seconds() - t0 < 0.5)
    for (int i = 0; i < 100000; ++i) x = x + static_cast<uint64_t>(i);
  start.phase("starting the engine");
  std::string before;
  const std::string ext = sock.receive_until("EXTEND_TIMEOUT_USEC=30000000", 10, &before);
  EXPECT_NE(ext, "") << before;
  EXPECT_GE(start.extensions(), 1);
  EXPECT_NE(ext.find("\nSTATUS="), std::string::npos) << ext;
}

TEST(StartProgress, DoesNotExtendAStalledStart) {
  testing::TempDir tmp;
  testing::NotifySocket sock(tmp.file("notify"));
  ASSERT_TRUE(sock.ok());
  WithNotifySocket env(sock.address());
  StartProgress start("waiting", fast());
  EXPECT_EQ(sock.receive(5).rfind("STATUS=waiting (", 0), 0u);
  // Five ticks of a process that neither computes nor reads.
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  EXPECT_EQ(start.extensions(), 0);
  EXPECT_EQ(sock.receive(0.1), "");
}

TEST(StartProgress, SendsNothingWithoutNotifySocket) {
  ::unsetenv("NOTIFY_SOCKET");
  StartProgress start("loading", fast());
  start.phase("still loading");
  const double t0 = cpu_seconds();
  volatile uint64_t x = 0;
  while (cpu_seconds() - t0 < 0.2)
    for (int i = 0; i < 100000; ++i) x = x + static_cast<uint64_t>(i);
  EXPECT_EQ(start.extensions(), 0);
}

}  // namespace
}  // namespace k3::base
