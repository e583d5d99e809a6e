#include "shared/base/service_notify.h"

#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include "tests/notify_socket.h"
#include "tests/test_util.h"

namespace k3::base {
namespace {

using testing::NotifySocket;

// Sets $NOTIFY_SOCKET for one test; restores it after.
class NotifyEnv {
 public:
  explicit NotifyEnv(const std::string& value) {
    if (const char* old = std::getenv("NOTIFY_SOCKET")) old_ = old, had_ = true;
    ::setenv("NOTIFY_SOCKET", value.c_str(), 1);
  }
  ~NotifyEnv() {
    if (had_)
      ::setenv("NOTIFY_SOCKET", old_.c_str(), 1);
    else
      ::unsetenv("NOTIFY_SOCKET");
  }

 private:
  std::string old_;
  bool had_ = false;
};

TEST(ServiceNotify, SendsEachStateToASocketPath) {
  testing::TempDir tmp;
  NotifySocket sock(tmp.file("notify"));
  ASSERT_TRUE(sock.ok());
  NotifyEnv env(sock.address());
  ASSERT_TRUE(notify_status("loading the model").ok());
  EXPECT_EQ(sock.receive(5), "STATUS=loading the model");
  ASSERT_TRUE(notify_extend_timeout(60, "loading (10s)").ok());
  EXPECT_EQ(sock.receive(5), "EXTEND_TIMEOUT_USEC=60000000\nSTATUS=loading (10s)");
  ASSERT_TRUE(notify_extend_timeout(1.5).ok());
  EXPECT_EQ(sock.receive(5), "EXTEND_TIMEOUT_USEC=1500000");
  ASSERT_TRUE(notify_ready("serving on unix:/run/k3serve/engined.sock").ok());
  EXPECT_EQ(sock.receive(5), "READY=1\nSTATUS=serving on unix:/run/k3serve/engined.sock");
  ASSERT_TRUE(notify_stopping().ok());
  EXPECT_EQ(sock.receive(5), "STOPPING=1\nSTATUS=stopping");
}

TEST(ServiceNotify, ReachesAnAbstractSocket) {
  NotifySocket sock("@k3test-notify-" + std::to_string(::getpid()));
  ASSERT_TRUE(sock.ok());
  NotifyEnv env(sock.address());
  ASSERT_TRUE(notify_ready("up").ok());
  EXPECT_EQ(sock.receive(5), "READY=1\nSTATUS=up");
}

TEST(ServiceNotify, DoesNothingWithoutNotifySocket) {
  NotifyEnv env("");
  ::unsetenv("NOTIFY_SOCKET");
  EXPECT_TRUE(notify_ready("up").ok());
  NotifyEnv empty("");
  EXPECT_TRUE(notify_stopping().ok());
}

TEST(ServiceNotify, NamesABadSocketInItsError) {
  {
    NotifyEnv env("relative/path");
    const Status s = notify_ready("up");
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_CONTAINS(msg(s), "NOTIFY_SOCKET='relative/path'");
  }
  {
    testing::TempDir tmp;
    NotifyEnv env(tmp.file("nobody-listens"));
    const Status s = notify_ready("up");
    EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable);
    EXPECT_CONTAINS(msg(s), "nobody-listens");
  }
  {
    NotifyEnv env("/" + std::string(200, 'x'));
    EXPECT_CONTAINS(msg(notify_ready("up")), "too long");
  }
}

}  // namespace
}  // namespace k3::base
