// A scripted engined for the gateway's tests: a fake EngineService on a unix
// socket that streams chosen token ids and records what it was asked, and a
// fixture running the gateway's HTTP and gRPC APIs over it.
#pragma once

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#define CPPHTTPLIB_OPENSSL_SUPPORT
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "gateway/core/gateway_core.h"
#include "gateway/grpc/grpc_api.h"
#include "gateway/http/http_api.h"
#include "k3serve/v1/engine.grpc.pb.h"
#include "shared/chat/xtml_render.h"
#include "shared/chat/xtml_tokens.h"
#include "shared/rpc/server.h"
#include "shared/tokenizer/tokenizer.h"
#include "tests/test_util.h"

namespace k3::gateway::fake_engine {

using json = nlohmann::json;
namespace v1 = k3serve::v1;

// Streams `script` (token ids) after a started event, `progress` reports
// and an optional silent pause; records the request.
class FakeEngine final : public v1::EngineService::Service {
 public:
  grpc::Status Describe(grpc::ServerContext*, const v1::EngineDescribeRequest*,
                        v1::EngineDescribeResponse* out) override {
    out->set_sessions(sessions);
    out->set_max_context(4096);
    return grpc::Status::OK;
  }
  grpc::Status Generate(grpc::ServerContext* ctx, const v1::GenerateRequest* req,
                        grpc::ServerWriter<v1::GenerateEvent>* w) override {
    std::vector<int32_t> script;
    std::vector<v1::GenerateProgress> reports;
    {
      std::lock_guard<std::mutex> lk(mu);
      last = *req;
      script = this->script;
      reports = this->progress;
    }
    ++generating;
    struct Done {
      std::atomic<int>& n;
      ~Done() { --n; }
    } done{generating};
    if (!fail.ok()) return rpc::to_grpc(fail);
    v1::GenerateEvent e;
    e.mutable_started()->set_reused_tokens(7);
    e.mutable_started()->set_restored_tokens(3);
    w->Write(e);
    // Sleeps `ms` unless cancelled (false) or released.
    auto wait = [&](int ms) {
      for (int i = 0; i < ms / 5 && !release; ++i) {
        if (ctx->IsCancelled()) return false;
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      return !ctx->IsCancelled();
    };
    for (const v1::GenerateProgress& p : reports) {
      v1::GenerateEvent ev;
      *ev.mutable_progress() = p;
      w->Write(ev);
      if (!wait(progress_delay_ms)) {
        cancelled = true;
        return grpc::Status::CANCELLED;
      }
    }
    for (size_t i = 0; i < script.size(); ++i) {
      if (i == static_cast<size_t>(pause_after) && !wait(pause_ms)) {
        cancelled = true;
        return grpc::Status::CANCELLED;
      }
      if (ctx->IsCancelled()) {
        cancelled = true;
        return grpc::Status::CANCELLED;
      }
      v1::GenerateEvent t;
      t.set_token(script[i]);
      w->Write(t);
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    }
    // Give a cancel time to land (a stop string's) before finishing.
    for (int i = 0; i < (linger ? 100 : 0) && delay_ms > 0; ++i) {
      if (ctx->IsCancelled()) {
        cancelled = true;
        return grpc::Status::CANCELLED;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    v1::GenerateEvent f;
    f.mutable_finished()->set_reason(v1::GenerateFinished::STOP);
    w->Write(f);
    return grpc::Status::OK;
  }

  std::mutex mu;
  std::vector<int32_t> script;
  // Prompt-reading reports sent after `started`, `progress_delay_ms` apart.
  std::vector<v1::GenerateProgress> progress;
  int progress_delay_ms = 0;
  v1::GenerateRequest last;
  Status fail;
  int delay_ms = 0;
  bool linger = true;  // with delay_ms: 0.5 s between the last token and the end
  // Silence for `pause_ms` (or until `release`) before script token
  // `pause_after`: a stalled engine.
  int pause_ms = 0;
  int pause_after = 0;
  std::atomic<bool> release{false};
  int sessions = 2;
  std::atomic<bool> cancelled{false};
  std::atomic<int> generating{0};  // Generate calls running
};

class GatewayOverFakeEngine : public ::testing::Test {
 protected:
  void SetUp() override {
    auto tok = tokenizer::Tokenizer::load(testing::tiny_model_dir());
    ASSERT_TRUE(tok.ok()) << tok.status();
    tok_.emplace(*tok);
    const std::string addr = "unix:" + tmp_.file("engined.sock");
    auto server = rpc::start_server(addr, {&engine_});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(server->server);
    GatewayConfig c;
    c.model_dir = testing::tiny_model_dir();
    c.model_name = "tiny";
    c.engined = addr;
    c.poll_seconds = 0.1;
    c.request_timeout_s = timeout_s_;
    c.progress_timeout_s = progress_timeout_s_;
    configure(c);
    ASSERT_TRUE(c.validate().ok());
    auto core = GatewayCore::create(c);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
    http_ = std::make_unique<HttpApi>(core_.get());
    auto bound = http_->start("127.0.0.1:0");
    ASSERT_TRUE(bound.ok()) << bound.status();
    port_ = std::stoi(bound->substr(bound->rfind(':') + 1));
    grpc_api_ = std::make_unique<GrpcApi>(core_.get());
    GatewayConfig gc = core_->config();
    gc.grpc_listen = grpc_listen_.empty() ? "unix:" + tmp_.file("gateway.sock") : grpc_listen_;
    rpc::ServerOptions so = gc.grpc_server_options();
    so.gate = grpc_api_->token_gate();
    auto gs = rpc::start_server(gc.grpc_listen, {grpc_api_.get()}, so);
    ASSERT_TRUE(gs.ok()) << gs.status();
    grpc_server_ = std::move(gs->server);
    grpc_address_ = gs->address;
    for (int i = 0; i < 200 && !core_->health().ok; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(core_->health().ok);
  }
  // Config changes of a derived fixture.
  virtual void configure(GatewayConfig&) {}
  void TearDown() override {
    if (grpc_server_) grpc_server_->Shutdown(std::chrono::system_clock::now());
    if (http_) http_->stop();
    if (server_) server_->Shutdown();
  }
  void script(const std::string& xtml) {
    auto ids = tok_->encode_markup(xtml);
    ASSERT_TRUE(ids.ok()) << ids.status();
    std::lock_guard<std::mutex> lk(engine_.mu);
    engine_.script = *ids;
  }
  httplib::Result post(const std::string& path, const json& body) {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(60, 0);
    return c.Post(path, body.dump(), "application/json");
  }
  // data: lines of an SSE body, as JSON (the [DONE] marker checked and dropped).
  static std::vector<json> events(const std::string& body) {
    std::vector<json> out;
    size_t pos = 0;
    bool done = false;
    while ((pos = body.find("data: ", pos)) != std::string::npos) {
      const size_t end = body.find("\n\n", pos);
      const std::string data = body.substr(pos + 6, end - pos - 6);
      pos = end;
      if (data == "[DONE]") {
        done = true;
        continue;
      }
      out.push_back(json::parse(data));
    }
    EXPECT_TRUE(done);
    return out;
  }

  testing::TempDir tmp_;
  FakeEngine engine_;
  std::unique_ptr<grpc::Server> server_;
  std::optional<tokenizer::Tokenizer> tok_;
  std::unique_ptr<GatewayCore> core_;
  std::unique_ptr<HttpApi> http_;
  std::unique_ptr<GrpcApi> grpc_api_;
  std::unique_ptr<grpc::Server> grpc_server_;
  int port_ = 0;
  double timeout_s_ = 0;  // none, the default
  double progress_timeout_s_ = 300;
  std::string grpc_listen_;  // default: a unix socket in tmp_
  std::string grpc_address_;
};

// The same with a 1 s request deadline (--request-timeout-s 1).
class GatewayShortDeadline : public GatewayOverFakeEngine {
 protected:
  void SetUp() override {
    timeout_s_ = 1.0;
    GatewayOverFakeEngine::SetUp();
  }
};

}  // namespace k3::gateway::fake_engine
