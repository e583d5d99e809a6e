// The three daemons as real processes on the tiny model (expertd over shared
// memory, or none: engined reads the experts in-process), engined serve and
// the gateway, as deploy/run-local.sh starts them; clients for the public
// APIs and engined's counters.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "k3serve/v1/engine.grpc.pb.h"
#include "k3serve/v1/expert.grpc.pb.h"
#include "k3serve/v1/gateway.grpc.pb.h"
#include "tests/test_util.h"

namespace k3::testing {

struct StackOptions {
  int expertd = 1;  // instances, each serving every expert (replicas)
  int sessions = 2;
  int max_queue = 64;
  int checkpoint_mb = 64;
  int max_prompt_tokens = 0;
  std::string api_key;
  std::string model_dir;  // empty: the tiny model
  // expertd --segment-dir: the segments are files there (DIR/NAME), named so
  // in the topology file, engined's --expertd and the placement.
  std::string segment_dir;
  // Storage hosts for the topology file's "remote_expertd" (entries as the
  // file takes them); with any, the gateway gets a topology even with no
  // local expertd.
  std::vector<nlohmann::json> remote_expertd;
  // More engined serve flags.
  std::vector<std::string> engined_flags;
  // More gateway flags.
  std::vector<std::string> gateway_flags;
};

// One host's deployment, as deploy/run-local.sh starts it.
class Stack {
 public:
  explicit Stack(const StackOptions& o) : opt_(o) {
    const std::string bin = bin_dir();
    nlohmann::json topo = {{"expertd", nlohmann::json::array()}};
    if (!o.remote_expertd.empty()) topo["remote_expertd"] = o.remote_expertd;
    for (int i = 0; i < o.expertd; ++i) {
      const std::string seg = "k3stack-" + std::to_string(::getpid()) + "-" + std::to_string(i);
      const std::string sock = tmp_.file("expertd-" + std::to_string(i) + ".sock");
      const std::string ref = o.segment_dir.empty() ? seg : o.segment_dir + "/" + seg;
      segments_.push_back(ref);
      expertd_sockets_.push_back("unix:" + sock);
      std::vector<std::string> x = {
          bin + "/expertd", "--model", model_dir(),  "--listen", "unix:" + sock,
          "--segment",      seg,       "--cache-gb", "0.05"};
      nlohmann::json entry = {{"name", "d" + std::to_string(i)}, {"address", "unix:" + sock}};
      if (!o.segment_dir.empty()) {
        x.insert(x.end(), {"--segment-dir", o.segment_dir});
        entry["segment"] = ref;
      }
      expertd_.push_back(
          std::make_unique<Process>(x, tmp_.file("expertd-" + std::to_string(i) + ".log")));
      topo["expertd"].push_back(entry);
    }
    write_file(tmp_.file("topology.json"), topo.dump());
    engined_addr_ = "unix:" + tmp_.file("engined.sock");
    std::vector<std::string> e = {bin + "/engined",  "serve",
                                  "--model",         model_dir(),
                                  "--listen",        engined_addr_,
                                  "--sessions",      std::to_string(o.sessions),
                                  "--checkpoint-mb", std::to_string(o.checkpoint_mb),
                                  "--threads",       "2",
                                  "--chunk",         "16"};
    for (const auto& s : segments_) {
      e.push_back("--expertd");
      e.push_back(s);
    }
    e.insert(e.end(), o.engined_flags.begin(), o.engined_flags.end());
    engined_ = std::make_unique<Process>(e, tmp_.file("engined.log"));
    std::vector<std::string> g = {bin + "/gateway",
                                  "--model",
                                  model_dir(),
                                  "--engined",
                                  engined_addr_,
                                  "--http-listen",
                                  "127.0.0.1:0",
                                  "--grpc-listen",
                                  "127.0.0.1:0",
                                  "--ready-file",
                                  tmp_.file("ready"),
                                  "--poll-seconds",
                                  "0.2",
                                  "--max-queue",
                                  std::to_string(o.max_queue)};
    if (o.expertd > 0 || !o.remote_expertd.empty()) {
      g.push_back("--topology");
      g.push_back(tmp_.file("topology.json"));
    }
    if (o.max_prompt_tokens > 0) {
      g.push_back("--max-prompt-tokens");
      g.push_back(std::to_string(o.max_prompt_tokens));
    }
    if (!o.api_key.empty()) {
      write_file(tmp_.file("keys"), "# test key\n" + o.api_key + "\n");
      std::filesystem::permissions(tmp_.file("keys"), std::filesystem::perms(0600));
      g.push_back("--api-keys");
      g.push_back(tmp_.file("keys"));
    }
    g.insert(g.end(), o.gateway_flags.begin(), o.gateway_flags.end());
    gateway_ = std::make_unique<Process>(g, tmp_.file("gateway.log"));
  }

  // Stops the daemons in order (gateway, engined, expertd) with SIGTERM, so
  // expertd unlinks its segment; one a test killed leaves its segment, which
  // is removed here (each is tens of MB of /dev/shm).
  ~Stack() {
    gateway_->stop(SIGTERM);
    engined_->stop(SIGTERM);
    for (auto& e : expertd_) e->stop(SIGTERM);
    for (const auto& seg : segments_)
      ::unlink((seg.front() == '/' ? seg : "/dev/shm/" + seg).c_str());
  }

  // Waits for the ready file and /health 200.
  bool wait_ready(double seconds = 90) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      std::ifstream f(tmp_.file("ready"));
      std::string http, grpc;
      if (f >> http >> grpc) {
        http_ = http.substr(5);
        grpc_ = grpc.substr(5);
        auto c = client();
        auto r = c.Get("/health");
        if (r && r->status == 200) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return false;
  }

  httplib::Client client() const {
    const size_t colon = http_.rfind(':');
    httplib::Client c(http_.substr(0, colon), std::stoi(http_.substr(colon + 1)));
    c.set_read_timeout(120, 0);
    c.set_connection_timeout(10, 0);
    if (!opt_.api_key.empty()) c.set_bearer_token_auth(opt_.api_key);
    return c;
  }
  httplib::Result post(const std::string& path, const nlohmann::json& body) const {
    return client().Post(path, body.dump(), "application/json");
  }
  std::unique_ptr<k3serve::v1::Gateway::Stub> gateway_stub() const {
    return k3serve::v1::Gateway::NewStub(
        grpc::CreateChannel(grpc_, grpc::InsecureChannelCredentials()));
  }
  k3serve::v1::EngineStatsResponse engine_stats() const {
    auto stub = k3serve::v1::EngineService::NewStub(
        grpc::CreateChannel(engined_addr_, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    k3serve::v1::EngineStatsResponse out;
    EXPECT_TRUE(stub->Stats(&ctx, k3serve::v1::EngineStatsRequest(), &out).ok());
    return out;
  }
  k3serve::v1::EngineDescribeResponse engine_describe() const {
    auto stub = k3serve::v1::EngineService::NewStub(
        grpc::CreateChannel(engined_addr_, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    k3serve::v1::EngineDescribeResponse out;
    EXPECT_TRUE(stub->Describe(&ctx, k3serve::v1::EngineDescribeRequest(), &out).ok());
    return out;
  }
  k3serve::v1::StatsResponse expertd_stats(int i) const {
    auto stub = k3serve::v1::ExpertService::NewStub(grpc::CreateChannel(
        expertd_sockets_[static_cast<size_t>(i)], grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    k3serve::v1::StatsResponse out;
    stub->Stats(&ctx, k3serve::v1::StatsRequest(), &out);
    return out;
  }
  // Polls engined until `pred` holds (true) or `seconds` pass.
  template <typename Pred>
  bool wait_engine(Pred pred, double seconds = 30) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      if (pred(engine_stats())) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }
  Process& expertd(int i) { return *expertd_[static_cast<size_t>(i)]; }
  const std::string& engined_address() const { return engined_addr_; }
  // Stops engined (SIGKILL): the gateway finds nothing at its address.
  void stop_engined() { engined_->stop(SIGKILL); }

  const std::string& segment(int i) const { return segments_[static_cast<size_t>(i)]; }
  const std::string& http() const { return http_; }
  std::string logs() const {
    std::string s;
    for (const char* f : {"gateway.log", "engined.log", "expertd-0.log"})
      s += std::string("--- ") + f + "\n" + read_file(tmp_.file(f));
    return s;
  }

 private:
  const std::string& model_dir() const {
    return opt_.model_dir.empty() ? tiny_model_dir() : opt_.model_dir;
  }

  StackOptions opt_;
  TempDir tmp_;
  std::vector<std::string> segments_, expertd_sockets_;
  std::string engined_addr_, http_, grpc_;
  std::vector<std::unique_ptr<Process>> expertd_;
  std::unique_ptr<Process> engined_, gateway_;
};

// A stack with no expertd: engined reads the experts in-process.
inline StackOptions in_process(int sessions = 2) {
  StackOptions o;
  o.expertd = 0;
  o.sessions = sessions;
  return o;
}

// A greedy chat request of one user message.
inline nlohmann::json chat_body(const std::string& text, int max_tokens) {
  return {{"messages", {{{"role", "user"}, {"content", text}}}},
          {"max_tokens", max_tokens},
          {"temperature", 0}};
}

// POST that must answer 200 with JSON; the parsed body.
inline nlohmann::json ok_post(const Stack& s, const std::string& path, const nlohmann::json& body) {
  auto r = s.post(path, body);
  EXPECT_TRUE(r) << path;
  if (!r) return nlohmann::json();
  EXPECT_EQ(r->status, 200) << path << " " << body.dump() << " -> " << r->body;
  nlohmann::json j = nlohmann::json::parse(r->body, nullptr, false);
  EXPECT_FALSE(j.is_discarded()) << path << " answered no JSON: " << r->body;
  return j;
}

// The JSON chunks of a server-sent-events body, in order ("data: [DONE]" is
// not one).
inline std::vector<nlohmann::json> sse_chunks(const std::string& body) {
  std::vector<nlohmann::json> out;
  size_t pos = 0;
  while ((pos = body.find("data: {", pos)) != std::string::npos) {
    const size_t end = body.find("\n\n", pos);
    out.push_back(nlohmann::json::parse(body.substr(pos + 6, end - pos - 6)));
    pos = end;
  }
  return out;
}

}  // namespace k3::testing
