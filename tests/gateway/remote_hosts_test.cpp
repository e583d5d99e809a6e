// The gateway with a storage host (issue 10 parts 3 and 8): a remote expertd
// on loopback named in the topology file, engined told of it by the
// gateway's placement (which replaces the host engined's own flags named),
// /metrics per host agreeing with the host's own Stats, and a host that dies
// answered with 503 / UNAVAILABLE naming it until it is back. Real processes:
// expertd --remote-listen (the expertd suites' harness), engined serve, the
// gateway; a real HTTP client and gRPC stubs.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>

#include <chrono>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <thread>

#include "k3serve/v1/engine.grpc.pb.h"
#include "k3serve/v1/gateway.grpc.pb.h"
#include "tests/expertd/remote_harness.h"
#include "tests/gateway/stack_fixture.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

using json = nlohmann::json;
using expertd_test::RemoteExpertd;
using testing::chat_body;
using testing::Stack;
using testing::StackOptions;
using testing::TempDir;
namespace v1 = k3serve::v1;

const std::vector<std::string> kInsecure = {"--insecure-remote"};

// The value of the sample `name{labels}` in a /metrics page, if present.
std::optional<double> sample(const std::string& page, const std::string& series) {
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line))
    if (line.rfind(series + " ", 0) == 0) return std::stod(line.substr(series.size() + 1));
  return std::nullopt;
}

std::string metrics(const Stack& s) {
  auto r = s.client().Get("/metrics");
  return r && r->status == 200 ? r->body : std::string();
}

// Waits until `pred(page)` holds for a /metrics page (the gateway polls
// engined every 0.2 s); returns the last page.
template <typename Pred>
std::string wait_metrics(const Stack& s, Pred pred, double seconds = 20) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  std::string page;
  do {
    page = metrics(s);
    if (pred(page)) return page;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  } while (std::chrono::steady_clock::now() < deadline);
  return page;
}

const v1::EngineStatsResponse::RemoteHost* host_of(const v1::EngineStatsResponse& st,
                                                   const std::string& name) {
  for (const auto& h : st.remote_hosts())
    if (h.name() == name) return &h;
  return nullptr;
}

// The gRPC API's Chat call: its status once the stream ends.
grpc::Status grpc_chat(const Stack& s, const std::string& text) {
  auto stub = s.gateway_stub();
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(60));
  v1::ChatRequest req;
  auto* m = req.add_messages();
  m->set_role("user");
  m->set_content(text);
  req.set_max_tokens(4);
  auto reader = stub->Chat(&ctx, req);
  v1::ChatEvent e;
  while (reader->Read(&e)) {
  }
  return reader->Finish();
}

TEST(GatewayRemoteHosts, MetricsPerHostFailureNamesTheHostAndRecovery) {
  TempDir tmp;
  auto host = std::make_unique<RemoteExpertd>(tmp, "gwr0", kInsecure, testing::tiny_model_dir());
  ASSERT_TRUE(host->wait_ready()) << host->log();
  const std::string address = host->address;

  StackOptions o;
  o.expertd = 0;
  o.remote_expertd = {json{{"name", "storage0"}, {"address", address}, {"insecure", true}}};
  // engined starts with a host of its own flags; the gateway's placement
  // replaces it (the topology file decides). No speculation: every stream
  // message is a demand step, so the host's message count is engined's.
  o.engined_flags = {"--remote-expertd",
                     "fromflags=" + address,
                     "--insecure-remote",
                     "--remote-deadline-ms",
                     "3000",
                     "--speculate",
                     "off"};
  Stack s(o);
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  ASSERT_TRUE(s.wait_engine([](const v1::EngineStatsResponse& st) {
    return st.remote_hosts_size() == 1 && st.remote_hosts(0).name() == "storage0";
  })) << s.logs();
  {
    const auto st = s.engine_stats();
    EXPECT_EQ(st.remote_hosts(0).address(), address);
    EXPECT_TRUE(st.remote_hosts(0).insecure());
    EXPECT_EQ(host_of(st, "fromflags"), nullptr);
  }

  // A placement's hosts are checked as the flags are, before anything changes.
  {
    auto stub = v1::EngineService::NewStub(
        grpc::CreateChannel(s.engined_address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    v1::Placement p;
    auto* h = p.add_remote_expertd();
    h->set_name("tlsless");
    h->set_address(address);
    v1::PlacementAck ack;
    const grpc::Status ps = stub->SetPlacement(&ctx, p, &ack);
    EXPECT_EQ(ps.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
    EXPECT_NE(ps.error_message().find("'tlsless': tls_ca is required"), std::string::npos)
        << ps.error_message();
    EXPECT_EQ(s.engine_stats().remote_hosts(0).name(), "storage0");
  }

  // A request through the host: the counters move, and /metrics, engined's
  // Stats and the host's own Stats agree.
  auto r = s.post("/v1/chat/completions", chat_body("hello storage", 6));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body << s.logs();
  const auto hs = host->stats();
  ASSERT_GT(hs.remote_requests(), 0u);
  ASSERT_GT(hs.remote_rows(), 0u);
  const std::string label = "{host=\"storage0\"}";
  std::string page = wait_metrics(s, [&](const std::string& p) {
    return sample(p, "k3_remote_expertd_bytes_sent_total" + label) ==
               static_cast<double>(hs.remote_bytes_in()) &&
           sample(p, "k3_remote_expertd_bytes_received_total" + label) ==
               static_cast<double>(hs.remote_bytes_out());
  });
  EXPECT_EQ(sample(page, "k3_remote_expertd_bytes_sent_total" + label),
            static_cast<double>(hs.remote_bytes_in()))
      << page;
  EXPECT_EQ(sample(page, "k3_remote_expertd_bytes_received_total" + label),
            static_cast<double>(hs.remote_bytes_out()));
  EXPECT_EQ(sample(page, "k3_remote_expertd_steps_total" + label),
            static_cast<double>(hs.remote_requests()));
  EXPECT_EQ(sample(page, "k3_remote_expertd_up" + label), 1.0);
  const auto st = s.engine_stats();
  const auto* eh = host_of(st, "storage0");
  ASSERT_NE(eh, nullptr);
  EXPECT_TRUE(eh->up());
  EXPECT_EQ(eh->bytes_sent(), hs.remote_bytes_in());
  EXPECT_EQ(eh->bytes_received(), hs.remote_bytes_out());
  EXPECT_EQ(eh->steps(), hs.remote_requests());
  // Every expert engined routed went to the only host.
  EXPECT_EQ(eh->expert_requests(), st.expert_requests());
  EXPECT_GT(eh->expert_requests(), 0u);
  EXPECT_EQ(sample(page, "k3_remote_expertd_expert_requests_total" + label),
            static_cast<double>(eh->expert_requests()));
  // Latency: one observation per step, a Prometheus histogram.
  EXPECT_EQ(sample(page, "k3_remote_expertd_step_seconds_count" + label),
            static_cast<double>(hs.remote_requests()));
  EXPECT_EQ(sample(page, "k3_remote_expertd_step_seconds_bucket{host=\"storage0\",le=\"+Inf\"}"),
            static_cast<double>(hs.remote_requests()));
  EXPECT_GT(sample(page, "k3_remote_expertd_step_seconds_sum" + label).value_or(0), 0.0);
  for (const char* type : {"# TYPE k3_remote_expertd_up gauge",
                           "# TYPE k3_remote_expertd_expert_requests_total counter",
                           "# TYPE k3_remote_expertd_bytes_sent_total counter",
                           "# TYPE k3_remote_expertd_bytes_received_total counter",
                           "# TYPE k3_remote_expertd_step_seconds histogram"})
    EXPECT_NE(page.find(type), std::string::npos) << type;

  // The only owner dies: HTTP 503 and gRPC UNAVAILABLE, both naming it.
  ASSERT_EQ(::kill(host->d->proc->pid(), SIGKILL), 0);
  host->d->proc->wait_exit(10);
  auto dead = s.post("/v1/chat/completions", chat_body("anyone there", 4));
  ASSERT_TRUE(dead);
  EXPECT_EQ(dead->status, 503) << dead->body;
  const json err = json::parse(dead->body, nullptr, false);
  ASSERT_TRUE(err.is_object()) << dead->body;
  const std::string message = err["error"]["message"].get<std::string>();
  EXPECT_NE(message.find("storage0"), std::string::npos) << message;
  EXPECT_NE(message.find(address), std::string::npos) << message;
  EXPECT_EQ(message.find("engined is unavailable"), std::string::npos) << message;
  const grpc::Status gs = grpc_chat(s, "anyone there");
  EXPECT_EQ(gs.error_code(), grpc::StatusCode::UNAVAILABLE) << gs.error_message();
  EXPECT_NE(gs.error_message().find("storage0"), std::string::npos) << gs.error_message();
  page = wait_metrics(
      s, [&](const std::string& p) { return sample(p, "k3_remote_expertd_up" + label) == 0.0; });
  EXPECT_EQ(sample(page, "k3_remote_expertd_up" + label), 0.0) << page;
  EXPECT_GE(sample(page, "k3_remote_expertd_failures_total" + label).value_or(0), 1.0);
  // /health says which host is down.
  auto health = s.client().Get("/health");
  ASSERT_TRUE(health);
  EXPECT_NE(health->body.find("storage0"), std::string::npos) << health->body;
  // The only storage host down: not "ok" (it said so before).
  EXPECT_NE(health->body.find("\"status\":\"degraded\""), std::string::npos) << health->body;
  EXPECT_NE(health->body.find("remote expertd storage0"), std::string::npos) << health->body;

  // Back on the same address: engined's health polling re-adds it and the
  // next requests succeed, through both APIs.
  host.reset();
  RemoteExpertd again(tmp, "gwr1", kInsecure, testing::tiny_model_dir(), "", address);
  ASSERT_TRUE(again.wait_ready()) << again.log();
  page = wait_metrics(
      s, [&](const std::string& p) { return sample(p, "k3_remote_expertd_up" + label) == 1.0; });
  EXPECT_EQ(sample(page, "k3_remote_expertd_up" + label), 1.0) << page << s.logs();
  auto back = s.post("/v1/chat/completions", chat_body("welcome back", 4));
  ASSERT_TRUE(back);
  EXPECT_EQ(back->status, 200) << back->body << s.logs();
  const grpc::Status gb = grpc_chat(s, "welcome back");
  EXPECT_TRUE(gb.ok()) << gb.error_message();
  EXPECT_GT(again.stats().remote_rows(), 0u);
}

// engined itself unreachable keeps the gateway's own wording.
TEST(GatewayRemoteHosts, EnginedDownIsStillSaidSo) {
  StackOptions o;
  o.expertd = 0;
  Stack s(o);
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  s.stop_engined();
  auto r = s.post("/v1/chat/completions", chat_body("hello", 4));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_NE(r->body.find("engined is unavailable"), std::string::npos) << r->body;
}

}  // namespace
}  // namespace k3
