// engined's jobs as processes: `engined generate` and `engined score` stop on
// SIGINT and SIGTERM (killed by the signal, the shell's 130 and 143) instead
// of running on until their work ends. Each job waits on a remote expertd
// that accepted the connection and never answers (a listening socket nobody
// accepts on), so it is still running when the signal comes.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "tests/test_util.h"

namespace k3::engined {
namespace {

// A TCP port that completes handshakes (the kernel's backlog) and never says
// a word: a storage host that hangs.
class SilentHost {
 public:
  SilentHost() {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t n = sizeof(a);
    EXPECT_EQ(::bind(fd_, reinterpret_cast<sockaddr*>(&a), n), 0);
    EXPECT_EQ(::listen(fd_, 16), 0);
    EXPECT_EQ(::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &n), 0);
    port_ = ntohs(a.sin_port);
  }
  ~SilentHost() { ::close(fd_); }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
};

void expect_stops_on(const std::string& job, int sig) {
  SilentHost host;
  std::vector<std::string> argv = {testing::bin_dir() + "/engined", job, "--model",
                                   testing::tiny_model_dir(), "--remote-expertd",
                                   "a=" + host.address(), "--insecure-remote",
                                   // Far longer than the test waits: only the signal ends the job.
                                   "--remote-deadline-ms", "120000", "--ids", "1,2,3"};
  testing::TempDir tmp;
  if (job == "generate") argv.insert(argv.end(), {"--max-tokens", "4"});
  if (job == "score") argv.insert(argv.end(), {"--out", tmp.file("logits.f32")});
  testing::Process p(argv);
  // The model loads in well under a second; the job then waits on the host.
  std::this_thread::sleep_for(std::chrono::milliseconds(1500));
  ASSERT_EQ(::kill(p.pid(), sig), 0);
  const int code = p.wait_exit(20);
  EXPECT_EQ(code, 128 + sig) << "engined " << job << " after signal " << sig
                             << " (-1: still running 20 s later)";
}

TEST(EnginedJobs, GenerateStopsOnSigterm) {
  expect_stops_on("generate", SIGTERM);
}
TEST(EnginedJobs, GenerateStopsOnSigint) {
  expect_stops_on("generate", SIGINT);
}
TEST(EnginedJobs, ScoreStopsOnSigterm) {
  expect_stops_on("score", SIGTERM);
}

}  // namespace
}  // namespace k3::engined
