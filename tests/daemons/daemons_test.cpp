// The daemons as real processes, talked to over real sockets.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <thread>

#include "k3serve/v1/engine.grpc.pb.h"
#include "k3serve/v1/expert.grpc.pb.h"
#include "k3serve/v1/gateway.grpc.pb.h"
#include "shared/checkpoint/model_config.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

using json = nlohmann::json;
using testing::Process;
using testing::TempDir;

// Polls Health on a fresh channel each time (a channel that saw the server
// absent backs off for seconds before it tries again).
template <typename Service>
bool wait_serving(const std::string& addr, double seconds) {
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    auto stub = Service::NewStub(grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(500));
    k3serve::v1::HealthRequest req;
    k3serve::v1::HealthResponse resp;
    if (stub->Health(&ctx, req, &resp).ok() &&
        resp.status() == k3serve::v1::HealthResponse::SERVING)
      return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return false;
}

int free_tcp_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa);
  socklen_t len = sizeof sa;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&sa), &len);
  ::close(fd);
  return ntohs(sa.sin_port);
}

TEST(Expertd, ServesHealthAndDescribeOnUnixSocketAndStopsOnSigterm) {
  TempDir tmp;
  const std::string addr = "unix:" + tmp.file("run/expertd.sock");  // parent created by expertd
  const std::string segment = "k3test-daemons-" + std::to_string(::getpid());
  Process p({testing::bin_dir() + "/expertd", "--model", testing::tiny_model_dir(), "--listen",
             addr, "--cache-gb", "0.05", "--segment", segment},
            tmp.file("log"));
  ASSERT_TRUE(wait_serving<k3serve::v1::ExpertService>(addr, 30))
      << testing::read_file(tmp.file("log"));
  auto stub = k3serve::v1::ExpertService::NewStub(
      grpc::CreateChannel(addr, grpc::InsecureChannelCredentials()));

  grpc::ClientContext ctx;
  k3serve::v1::DescribeRequest req;
  k3serve::v1::DescribeResponse resp;
  ASSERT_TRUE(stub->Describe(&ctx, req, &resp).ok());
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  EXPECT_EQ(resp.expert_bytes(), c->expert_bytes());
  ASSERT_EQ(resp.layers_size(), c->num_moe_layers());
  EXPECT_EQ(resp.layers(0).layer(), 1u);
  EXPECT_EQ(resp.layers(0).expert_count(), 32u);
  EXPECT_EQ(resp.model_fingerprint().size(), 16u);

  // A second instance on the same socket refuses to start.
  auto second =
      testing::run_command({testing::bin_dir() + "/expertd", "--model", testing::tiny_model_dir(),
                            "--listen", addr, "--cache-gb", "0.05", "--segment", segment});
  EXPECT_EQ(second.exit_code, 1);
  EXPECT_NE(second.err.find("another server is already listening on this socket"),
            std::string::npos)
      << second.err;

  EXPECT_EQ(p.stop(SIGTERM), 0);
  // A stale socket file left behind is no obstacle to the next start.
  Process again({testing::bin_dir() + "/expertd", "--model", testing::tiny_model_dir(), "--listen",
                 addr, "--cache-gb", "0.05", "--segment", segment},
                tmp.file("log2"));
  EXPECT_TRUE(wait_serving<k3serve::v1::ExpertService>(addr, 30))
      << testing::read_file(tmp.file("log2"));
  EXPECT_EQ(again.stop(SIGINT), 0);
}

TEST(Expertd, RefusesABadModelAtStart) {
  TempDir tmp;
  std::filesystem::copy(testing::tiny_model_dir(), tmp.file("m"),
                        std::filesystem::copy_options::recursive);
  // A drive owns its shards: with none holding an expert, nothing to serve.
  std::filesystem::remove(tmp.file("m/model-00002-of-00005.safetensors"));
  std::filesystem::remove(tmp.file("m/model-00003-of-00005.safetensors"));
  auto r = testing::run_command({testing::bin_dir() + "/expertd", "--model", tmp.file("m"),
                                 "--listen", "unix:" + tmp.file("e.sock")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("hold no routed expert of the model"), std::string::npos) << r.err;
  EXPECT_FALSE(std::filesystem::exists(tmp.file("e.sock"))) << "half-started daemon";

  r = testing::run_command({testing::bin_dir() + "/expertd", "--model", tmp.file("nowhere")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find(tmp.file("nowhere") + "/config.json: cannot open"), std::string::npos)
      << r.err;
}

// The gateway serves only while engined answers: its Health follows engined's.
TEST(Gateway, HealthFollowsEngined) {
  TempDir tmp;
  const std::string engined_addr = "unix:" + tmp.file("engined.sock");
  auto engined = std::make_unique<Process>(
      std::vector<std::string>{testing::bin_dir() + "/engined", "serve", "--model",
                               testing::tiny_model_dir(), "--listen", engined_addr},
      tmp.file("engined.log"));
  const std::string addr = "127.0.0.1:" + std::to_string(free_tcp_port());
  Process p({testing::bin_dir() + "/gateway", "--model", testing::tiny_model_dir(), "--engined",
             engined_addr, "--grpc-listen", addr, "--http-listen", "127.0.0.1:0", "--poll-seconds",
             "0.2"},
            tmp.file("log"));
  ASSERT_TRUE(wait_serving<k3serve::v1::Gateway>(addr, 60)) << testing::read_file(tmp.file("log"));
  // k3ctl health is a real client of the same API.
  auto r = testing::run_command(
      {testing::bin_dir() + "/k3ctl", "health", "--address", addr, "--service", "gateway"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["component"], "gateway");
  EXPECT_EQ(j["status"], "SERVING");

  // engined gone: NOT_SERVING, with the reason.
  EXPECT_EQ(engined->stop(SIGTERM), 0);
  bool down = false;
  for (int i = 0; i < 200 && !down; ++i) {
    r = testing::run_command(
        {testing::bin_dir() + "/k3ctl", "health", "--address", addr, "--service", "gateway"});
    down = r.exit_code == 1 && r.out.find("NOT_SERVING") != std::string::npos;
    if (!down) std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_TRUE(down) << r.out;
  EXPECT_NE(r.out.find("engined"), std::string::npos) << r.out;

  EXPECT_EQ(p.stop(SIGTERM), 0);
  r = testing::run_command(
      {testing::bin_dir() + "/k3ctl", "health", "--address", addr, "--service", "gateway"});
  EXPECT_EQ(r.exit_code, 1);
}

TEST(Engined, ServeValidatesTheModelAndAnswersHealth) {
  TempDir tmp;
  const std::string addr = "unix:" + tmp.file("engined.sock");
  Process p({testing::bin_dir() + "/engined", "serve", "--model", testing::tiny_model_dir(),
             "--listen", addr},
            tmp.file("log"));
  ASSERT_TRUE(wait_serving<k3serve::v1::EngineService>(addr, 30))
      << testing::read_file(tmp.file("log"));
  EXPECT_EQ(p.stop(SIGTERM), 0);
}

TEST(K3ctl, InspectPrintsTheCheckpointSummary) {
  auto r = testing::run_command(
      {testing::bin_dir() + "/k3ctl", "inspect", "--model", testing::tiny_model_dir()});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["layers"], 6);
  EXPECT_EQ(j["kda_layers"], 4);
  EXPECT_EQ(j["mla_layers"], 2);
  EXPECT_EQ(j["shards"], 5);  // three text shards, the vision tower's two
  EXPECT_EQ(j["experts_contiguous"], 5 * 32);
  EXPECT_EQ(j["name_prefix"], "language_model.");
  r = testing::run_command({testing::bin_dir() + "/k3ctl", "inspect", "--model", "/nonexistent"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "k3ctl: /nonexistent/config.json: cannot open: No such file or directory\n");
}

TEST(K3ctl, MkmodelCommandLine) {
  TempDir tmp;
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "mkmodel", "--preset", "tiny",
                                 "--out", tmp.file("m"), "--seed", "3", "--layers", "2",
                                 "--experts", "4", "--hidden", "96"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json j = json::parse(r.out);
  EXPECT_EQ(j["shards"], 5);  // three text shards, the vision tower's two
  auto c = checkpoint::load_model_config(tmp.file("m"));
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->hidden_size, 96);
  EXPECT_EQ(c->num_experts, 4);
  r = testing::run_command({testing::bin_dir() + "/k3ctl", "mkmodel", "--out", tmp.file("m")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is not empty"), std::string::npos);
}

}  // namespace
}  // namespace k3
