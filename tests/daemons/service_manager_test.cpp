// The daemons as a service manager sees them (issue 27): `--version` on every
// program, and systemd's notify protocol (Type=notify units) through a
// notify socket the test creates, since PID 1 here is not systemd: STATUS
// while starting, READY=1 only once the daemon's own API answers, STOPPING=1
// on SIGTERM.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <thread>

#include "k3serve/v1/engine.grpc.pb.h"
#include "k3serve/v1/expert.grpc.pb.h"
#include "k3serve/v1/gateway.grpc.pb.h"
#include "shared/base/version.h"
#include "tests/notify_socket.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

using testing::NotifySocket;
using testing::Process;
using testing::TempDir;

TEST(Version, EveryProgramPrintsItsVersionAndCommit) {
  for (const std::string program : {"expertd", "engined", "gateway", "k3ctl"}) {
    auto r = testing::run_command({testing::bin_dir() + "/" + program, "--version"});
    EXPECT_EQ(r.exit_code, 0) << program << ": " << r.err;
    // The same build as this test's: one version, one commit.
    EXPECT_EQ(r.out, base::version_line(program) + "\n") << program;
    EXPECT_NE(r.out.find(std::string(" (commit ") + base::git_commit() + ")"), std::string::npos);
    // --help lists it.
    r = testing::run_command({testing::bin_dir() + "/" + program, "--help"});
    EXPECT_NE(r.out.find("--version"), std::string::npos) << program;
  }
}

// One Health call with a short deadline on a fresh channel: does the API
// answer right now?
template <typename Service>
grpc::Status health_now(const std::string& addr, k3serve::v1::HealthResponse* out) {
  auto stub = Service::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  return stub->Health(&ctx, k3serve::v1::HealthRequest(), out);
}

// $NOTIFY_SOCKET for the daemons this test starts (they inherit it).
class NotifyTest : public ::testing::Test {
 protected:
  void SetUp() override {
    sock_ = std::make_unique<NotifySocket>(tmp_.file("notify"));
    ASSERT_TRUE(sock_->ok());
    ::setenv("NOTIFY_SOCKET", sock_->address().c_str(), 1);
  }
  void TearDown() override { ::unsetenv("NOTIFY_SOCKET"); }

  TempDir tmp_;
  std::unique_ptr<NotifySocket> sock_;
};

TEST_F(NotifyTest, EnginedIsReadyOnlyOnceTheModelServes) {
  const std::string addr = "unix:" + tmp_.file("engined.sock");
  Process p({testing::bin_dir() + "/engined", "serve", "--model", testing::tiny_model_dir(),
             "--listen", addr},
            tmp_.file("log"));
  std::string before;
  const std::string ready = sock_->receive_until("READY=1", 120, &before);
  ASSERT_NE(ready, "") << before << testing::read_file(tmp_.file("log"));
  // READY=1 means the control API answers, the model loaded behind it.
  k3serve::v1::HealthResponse h;
  ASSERT_TRUE(health_now<k3serve::v1::EngineService>(addr, &h).ok());
  EXPECT_EQ(h.status(), k3serve::v1::HealthResponse::SERVING);
  EXPECT_EQ(h.version(), base::version());
  EXPECT_EQ(h.commit(), base::git_commit());
  EXPECT_NE(ready.find("STATUS=serving on " + addr), std::string::npos) << ready;
  // Before it: what the start was doing, the model load among it.
  EXPECT_NE(before.find("STATUS=loading the model from " + testing::tiny_model_dir()),
            std::string::npos)
      << before;
  EXPECT_EQ(before.find("READY=1"), std::string::npos);

  ::kill(p.pid(), SIGTERM);
  EXPECT_NE(sock_->receive_until("STOPPING=1", 60), "");
  EXPECT_EQ(p.wait_exit(60), 0);
}

TEST_F(NotifyTest, ExpertdIsReadyOnceItsControlSocketAnswers) {
  const std::string addr = "unix:" + tmp_.file("expertd.sock");
  const std::string segment = "k3test-notify-" + std::to_string(::getpid());
  Process p({testing::bin_dir() + "/expertd", "--model", testing::tiny_model_dir(), "--listen",
             addr, "--cache-gb", "0.05", "--segment", segment},
            tmp_.file("log"));
  std::string before;
  const std::string ready = sock_->receive_until("READY=1", 120, &before);
  ASSERT_NE(ready, "") << before << testing::read_file(tmp_.file("log"));
  k3serve::v1::HealthResponse h;
  ASSERT_TRUE(health_now<k3serve::v1::ExpertService>(addr, &h).ok());
  EXPECT_EQ(h.status(), k3serve::v1::HealthResponse::SERVING);
  EXPECT_NE(before.find("STATUS=indexing the shards of "), std::string::npos) << before;
  EXPECT_NE(before.find("STATUS=creating the shared-memory segment"), std::string::npos) << before;
  ::kill(p.pid(), SIGTERM);
  EXPECT_NE(sock_->receive_until("STOPPING=1", 60), "");
  EXPECT_EQ(p.wait_exit(60), 0);
  ::unlink(("/dev/shm/" + segment).c_str());
}

TEST_F(NotifyTest, GatewayIsReadyOnceBothApisAnswer) {
  // No engined: the gateway's own APIs serve regardless (its Health says
  // NOT_SERVING, which is an answer).
  const std::string grpc_addr = "unix:" + tmp_.file("gateway.sock");
  Process p({testing::bin_dir() + "/gateway", "--model", testing::tiny_model_dir(), "--engined",
             "unix:" + tmp_.file("no-engined.sock"), "--grpc-listen", grpc_addr, "--http-listen",
             "127.0.0.1:0", "--ready-file", tmp_.file("ready")},
            tmp_.file("log"));
  std::string before;
  const std::string ready = sock_->receive_until("READY=1", 120, &before);
  ASSERT_NE(ready, "") << before << testing::read_file(tmp_.file("log"));
  k3serve::v1::HealthResponse h;
  EXPECT_TRUE(health_now<k3serve::v1::Gateway>(grpc_addr, &h).ok());
  EXPECT_TRUE(std::filesystem::exists(tmp_.file("ready")));
  EXPECT_NE(ready.find("STATUS=serving http=127.0.0.1:"), std::string::npos) << ready;
  ::kill(p.pid(), SIGTERM);
  EXPECT_NE(sock_->receive_until("STOPPING=1", 60), "");
  EXPECT_EQ(p.wait_exit(60), 0);
}

TEST(Notify, AnUnreachableNotifySocketIsLoggedNotFatal) {
  // A daemon started with a stale NOTIFY_SOCKET still serves, and says why
  // the service manager heard nothing.
  TempDir tmp;
  ::setenv("NOTIFY_SOCKET", tmp.file("gone").c_str(), 1);
  const std::string addr = "unix:" + tmp.file("engined.sock");
  Process p({testing::bin_dir() + "/engined", "serve", "--model", testing::tiny_model_dir(),
             "--listen", addr},
            tmp.file("log"));
  ::unsetenv("NOTIFY_SOCKET");
  bool up = false;
  for (int i = 0; i < 600 && !up; ++i) {
    k3serve::v1::HealthResponse h;
    up = health_now<k3serve::v1::EngineService>(addr, &h).ok();
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  EXPECT_TRUE(up) << testing::read_file(tmp.file("log"));
  EXPECT_EQ(p.stop(SIGTERM), 0);
  EXPECT_NE(testing::read_file(tmp.file("log")).find("cannot notify the service manager"),
            std::string::npos);
}

}  // namespace
}  // namespace k3
