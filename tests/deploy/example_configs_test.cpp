// Every config file under deploy/config (the one-host defaults and the worked
// examples in deploy/config/examples/) loads with the daemon's own loader, as
// its unit starts it (`--config FILE` plus the unit's own flags): expertd's
// and the gateway's config structs (expanded and validated as their main()
// does), the topology through the gateway's parser, and engined - whose flags
// live in its main() - started for real on its file, with only the paths
// that point into a real host moved into the test's directory (expertd's
// segment_dir, /run/k3serve/shm, which the units create). The worked
// example's files also agree with each other (segments, sockets, ports).
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <CLI/CLI.hpp>

#include "expertd/config.h"
#include "gateway/core/config.h"
#include "gateway/core/topology_file.h"
#include "k3serve/v1/engine.grpc.pb.h"
#include "shared/base/config_file.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::TempDir;

// Expands `--config file` and parses `args` into `cfg` as the daemon's main()
// does; the error names what failed.
template <typename Config>
Status load(Config& cfg, std::vector<std::string> args, const std::vector<std::string>& switches) {
  CLI::App app{args[0]};
  cfg.add_flags(app);
  K3_ASSIGN_OR_RETURN(auto expanded,
                      base::expand_config_file(args, 1, switches, [&](const std::string& name) {
                        return app.get_option_no_throw("--" + name) != nullptr;
                      }));
  auto argv = base::to_argv(expanded);
  try {
    app.parse(static_cast<int>(expanded.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    return absl::InvalidArgumentError(cat("flags: ", e.what()));
  }
  return cfg.validate();
}

// What the remote unit adds to expertd's command line (its credentials).
std::vector<std::string> remote_unit_flags(const TempDir& tmp) {
  const std::string token = tmp.file("remote.token");
  testing::write_file(token, "0123456789abcdef0123456789abcdef\n");
  ::chmod(token.c_str(), 0600);
  return {"--tls-cert", tmp.file("server.pem"), "--tls-key",         tmp.file("server.key"),
          "--tls-ca",   tmp.file("ca.pem"),     "--auth-token-file", token};
}

// engined serve on the file, its model, socket and checkpoint directory in
// `tmp`: up when its control socket answers Health.
void check_engined(const std::string& file, const TempDir& tmp) {
  const std::string sock = tmp.file("engined-" + std::to_string(::getpid()) + ".sock");
  const std::string log = tmp.file("engined.log");
  fs::create_directories(tmp.file("checkpoints"));
  testing::Process p({testing::bin_dir() + "/engined", "serve", "--config", file, "--model",
                      testing::tiny_model_dir(), "--listen", "unix:" + sock, "--checkpoint-dir",
                      tmp.file("checkpoints"), "--threads", "1"},
                     log);
  auto stub = k3serve::v1::EngineService::NewStub(
      grpc::CreateChannel("unix:" + sock, grpc::InsecureChannelCredentials()));
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(90);
  bool up = false;
  while (!up && std::chrono::steady_clock::now() < deadline) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(2));
    k3serve::v1::HealthResponse h;
    up = stub->Health(&ctx, k3serve::v1::HealthRequest(), &h).ok() &&
         h.status() == k3serve::v1::HealthResponse::SERVING;
    if (!up) std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  EXPECT_TRUE(up) << file << ": engined did not come up\n" << testing::read_file(log);
  p.stop(SIGTERM);
}

// The segment directory the units create for the service
// (RuntimeDirectory=k3serve/shm): every expertd config puts its segment there.
constexpr char kUnitSegmentDir[] = "/run/k3serve/shm";

// expertd's command line for `file`, its segment_dir (checked to be the
// units') moved into the test's directory, which stands in for it.
std::vector<std::string> expertd_args(const std::string& file, const TempDir& tmp) {
  const json x = json::parse(testing::read_file(file));
  EXPECT_EQ(x.value("segment_dir", ""), kUnitSegmentDir)
      << file << ": the segment belongs in the service's own directory";
  return {"expertd", "--config", file, "--segment-dir", tmp.path()};
}

void check_file(const fs::path& path, const TempDir& tmp) {
  const std::string file = path.string();
  const std::string name = path.filename().string();
  SCOPED_TRACE(file);
  if (name.rfind("expertd-remote-", 0) == 0) {
    expertd::Config c;
    std::vector<std::string> args = expertd_args(file, tmp);
    for (const auto& a : remote_unit_flags(tmp)) args.push_back(a);
    const Status s = load(c, args, {"no-direct", "insecure-remote"});
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_FALSE(c.remote.listen.empty()) << "a remote expertd config without remote_listen";
  } else if (name.rfind("expertd-", 0) == 0) {
    expertd::Config c;
    const Status s = load(c, expertd_args(file, tmp), {"no-direct", "insecure-remote"});
    EXPECT_TRUE(s.ok()) << s;
    EXPECT_EQ(
        c.server.segment,
        tmp.path() + "/" + json::parse(testing::read_file(file))["segment"].get<std::string>());
  } else if (name == "gateway.json") {
    gateway::GatewayConfig c;
    const Status s =
        load(c, {"gateway", "--config", file}, {"allow-plaintext", "metrics-public", "no-web-ui"});
    EXPECT_TRUE(s.ok()) << s;
  } else if (name == "topology.json") {
    const auto t = gateway::parse_topology(testing::read_file(file), file);
    EXPECT_TRUE(t.ok()) << t.status();
  } else if (name == "engined.json") {
    check_engined(file, tmp);
  } else {
    ADD_FAILURE() << "no loader known for " << file << ": add one to this test";
  }
}

TEST(DeployExampleConfigs, EveryConfigLoadsWithItsDaemonsLoader) {
  TempDir tmp;
  const fs::path root = fs::path(testing::source_dir()) / "deploy/config";
  int checked = 0;
  for (const auto& e : fs::recursive_directory_iterator(root)) {
    if (!e.is_regular_file() || e.path().extension() != ".json") continue;
    check_file(e.path(), tmp);
    ++checked;
  }
  // deploy/config's five plus the worked example's five + four.
  EXPECT_GE(checked, 14);
}

json read_json(const fs::path& p) {
  return json::parse(testing::read_file(p.string()));
}

TEST(DeployExampleConfigs, TheComputeAndStorageExampleHoldsTogether) {
  const fs::path ex =
      fs::path(testing::source_dir()) / "deploy/config/examples/compute-and-storage";
  const json engined = read_json(ex / "compute0/engined.json");
  const json topo = read_json(ex / "compute0/topology.json");
  // Two local drives: engined maps each one's segment (by its path in the
  // service's segment directory), the topology polls each one's socket and
  // expects that segment.
  std::vector<std::string> segments, sockets;
  for (int i = 0; i < 2; ++i) {
    const json x = read_json(ex / ("compute0/expertd-" + std::to_string(i) + ".json"));
    segments.push_back(x["segment_dir"].get<std::string>() + "/" + x["segment"].get<std::string>());
    sockets.push_back(x["listen"]);
  }
  EXPECT_EQ(engined["expertd"].get<std::vector<std::string>>(), segments);
  ASSERT_EQ(topo["expertd"].size(), 2u);
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(topo["expertd"][i]["address"], sockets[i]);
    EXPECT_EQ(topo["expertd"][i]["segment"], segments[i]);
  }
  // Four remote drives: each instance's port is one topology entry's.
  ASSERT_EQ(topo["remote_expertd"].size(), 4u);
  std::map<std::string, int> ports;
  for (int i = 0; i < 4; ++i) {
    const json x = read_json(ex / ("storage0/expertd-remote-" + std::to_string(i) + ".json"));
    const std::string listen = x["remote_listen"];
    ports[listen.substr(listen.rfind(':') + 1)] = i;
  }
  for (const auto& r : topo["remote_expertd"]) {
    const std::string a = r["address"];
    EXPECT_EQ(ports.count(a.substr(a.rfind(':') + 1)), 1u) << a;
  }
  EXPECT_EQ(read_json(ex / "compute0/gateway.json")["topology"], "/etc/k3serve/topology.json");
}

}  // namespace
}  // namespace k3
