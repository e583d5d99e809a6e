// The gateway over a scripted engined (a fake EngineService on a unix socket
// that streams chosen token ids): the OpenAI HTTP API's tool calls (ids,
// streamed argument fragments, finish_reason), reasoning/content split, usage
// from engined's counters, stop strings cancelling engined, and engined's
// errors. The real model's output is random, so these paths need a script.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <mutex>
#include <nlohmann/json.hpp>
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

namespace k3::gateway {
namespace {

using json = nlohmann::json;
namespace v1 = k3serve::v1;

// Streams `script` (token ids) after a started event; records the request.
class FakeEngine final : public v1::EngineService::Service {
 public:
  grpc::Status Describe(grpc::ServerContext*, const v1::EngineDescribeRequest*,
                        v1::EngineDescribeResponse* out) override {
    out->set_sessions(2);
    out->set_max_context(4096);
    return grpc::Status::OK;
  }
  grpc::Status Generate(grpc::ServerContext* ctx, const v1::GenerateRequest* req,
                        grpc::ServerWriter<v1::GenerateEvent>* w) override {
    std::vector<int32_t> script;
    {
      std::lock_guard<std::mutex> lk(mu);
      last = *req;
      script = this->script;
    }
    if (!fail.ok()) return rpc::to_grpc(fail);
    v1::GenerateEvent e;
    e.mutable_started()->set_reused_tokens(7);
    e.mutable_started()->set_restored_tokens(3);
    w->Write(e);
    for (int32_t id : script) {
      if (ctx->IsCancelled()) {
        cancelled = true;
        return grpc::Status::CANCELLED;
      }
      v1::GenerateEvent t;
      t.set_token(id);
      w->Write(t);
      std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    }
    for (int i = 0; i < 100 && delay_ms > 0; ++i) {  // give a cancel time to land
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
  v1::GenerateRequest last;
  Status fail;
  int delay_ms = 0;
  std::atomic<bool> cancelled{false};
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
    ASSERT_TRUE(c.validate().ok());
    auto core = GatewayCore::create(c);
    ASSERT_TRUE(core.ok()) << core.status();
    core_ = std::move(*core);
    http_ = std::make_unique<HttpApi>(core_.get());
    auto bound = http_->start("127.0.0.1:0");
    ASSERT_TRUE(bound.ok()) << bound.status();
    port_ = std::stoi(bound->substr(bound->rfind(':') + 1));
    grpc_api_ = std::make_unique<GrpcApi>(core_.get());
    auto gs = rpc::start_server("unix:" + tmp_.file("gateway.sock"), {grpc_api_.get()});
    ASSERT_TRUE(gs.ok()) << gs.status();
    grpc_server_ = std::move(gs->server);
    for (int i = 0; i < 200 && !core_->health().ok; ++i)
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    ASSERT_TRUE(core_->health().ok);
  }
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
  double timeout_s_ = 600;
};

// The same with a 1 s request deadline.
class GatewayShortDeadline : public GatewayOverFakeEngine {
 protected:
  void SetUp() override {
    timeout_s_ = 1.0;
    GatewayOverFakeEngine::SetUp();
  }
};

const char* kToolCallOutput =
    "plan<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|>"
    "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"0\"<|sep|>"
    "<|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|>"
    "<|open|>argument key=\"days\" type=\"number\"<|sep|>3<|close|>argument<|sep|>"
    "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>";

json tool_request() {
  return {{"model", "tiny"},
          {"messages",
           {{{"role", "system"}, {"content", "You are a weather bot."}},
            {{"role", "user"}, {"content", "Weather in Paris?"}}}},
          {"tools",
           {{{"type", "function"},
             {"function",
              {{"name", "get_weather"},
               {"parameters",
                {{"type", "object"},
                 {"properties",
                  {{"city", {{"type", "string"}}}, {"days", {{"type", "number"}}}}}}}}}}}},
          {"tool_choice", "required"},
          {"temperature", 0.5},
          {"seed", 42}};
}

TEST_F(GatewayOverFakeEngine, ToolCallsComeBackParsedWithIds) {
  script(kToolCallOutput);
  const json req = tool_request();
  auto r = post("/v1/chat/completions", req);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  const json& msg = j["choices"][0]["message"];
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
  EXPECT_EQ(msg["reasoning_content"], "plan");
  EXPECT_TRUE(msg["content"].is_null());
  ASSERT_EQ(msg["tool_calls"].size(), 1u);
  const json& call = msg["tool_calls"][0];
  EXPECT_EQ(call["id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(call["type"], "function");
  EXPECT_EQ(call["function"]["name"], "get_weather");
  EXPECT_EQ(json::parse(call["function"]["arguments"].get<std::string>()),
            json({{"city", "Paris"}, {"days", 3}}));
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 7);
  EXPECT_EQ(j["usage"]["k3_restored_tokens"], 3);
  EXPECT_EQ(j["usage"]["completion_tokens"], static_cast<int>(engine_.script.size()));

  // engined got the XTML prompt (tools declared), the sampling, and the turn
  // boundaries: the start of each message after the first.
  std::lock_guard<std::mutex> lk(engine_.mu);
  nlohmann::ordered_json render = nlohmann::ordered_json::parse(req.dump());
  render["thinking"] = true;
  auto segs = chat::render_chat(render, {});
  ASSERT_TRUE(segs.ok()) << segs.status();
  auto ids = chat::encode_segments(*tok_, *segs);
  ASSERT_TRUE(ids.ok());
  EXPECT_EQ(
      std::vector<int32_t>(engine_.last.prompt_ids().begin(), engine_.last.prompt_ids().end()),
      *ids);
  EXPECT_FLOAT_EQ(engine_.last.sampling().temperature(), 0.5f);
  EXPECT_EQ(engine_.last.sampling().seed(), 42u);
  EXPECT_GE(engine_.last.checkpoint_positions_size(), 1);
  for (uint32_t p : engine_.last.checkpoint_positions()) {
    EXPECT_GT(p, 0u);
    EXPECT_LT(p, ids->size());
    EXPECT_EQ((*ids)[p], *tok_->special_id("<|open|>"));
  }
}

TEST_F(GatewayOverFakeEngine, ToolCallsStreamAsOpenAiDeltas) {
  script(kToolCallOutput);
  json req = tool_request();
  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}};
  auto r = post("/v1/chat/completions", req);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const auto ev = events(r->body);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev[0]["choices"][0]["delta"]["role"], "assistant");
  std::string reasoning, args, id, name;
  std::string finish;
  for (const json& e : ev) {
    if (e["choices"].empty()) continue;
    const json& d = e["choices"][0]["delta"];
    if (d.contains("reasoning_content")) reasoning += d["reasoning_content"].get<std::string>();
    if (d.contains("tool_calls"))
      for (const json& tc : d["tool_calls"]) {
        EXPECT_EQ(tc["index"], 0);
        if (tc.contains("id")) {
          EXPECT_TRUE(id.empty());
          id = tc["id"];
          name = tc["function"]["name"];
        }
        if (tc["function"].contains("arguments"))
          args += tc["function"]["arguments"].get<std::string>();
      }
    if (!e["choices"][0]["finish_reason"].is_null()) finish = e["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(reasoning, "plan");
  EXPECT_EQ(id.rfind("call_", 0), 0u);
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(json::parse(args), json({{"city", "Paris"}, {"days", 3}}));
  EXPECT_EQ(finish, "tool_calls");
  EXPECT_TRUE(ev.back()["choices"].empty());
  EXPECT_EQ(ev.back()["usage"]["prompt_tokens_details"]["cached_tokens"], 7);
}

TEST_F(GatewayOverFakeEngine, StopStringEndsTheReplyAndCancelsEngined) {
  script("Hello world. STOP and then much more text that must not appear<|close|>response<|sep|>");
  engine_.delay_ms = 5;
  const json req = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                    {"enable_thinking", false},
                    {"stop", {"STOP"}}};
  auto r = post("/v1/chat/completions", req);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hello world. ");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  for (int i = 0; i < 200 && !engine_.cancelled; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(engine_.cancelled);
}

TEST_F(GatewayOverFakeEngine, EngineErrorsBecomeHttpErrors) {
  engine_.fail = absl::UnavailableError("expertd d0 is down");
  auto r = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503);
  EXPECT_NE(r->body.find("expertd d0 is down"), std::string::npos);
  auto s = post("/v1/chat/completions",
                {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"stream", true}});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, 200);  // headers went out before engined answered
  const auto ev = events(s->body);
  ASSERT_FALSE(ev.empty());
  EXPECT_NE(ev.back()["error"]["message"].get<std::string>().find("expertd d0 is down"),
            std::string::npos);
}

TEST_F(GatewayShortDeadline, TheDeadlineEndsAReplyThatKeepsStreaming) {
  std::string words;
  for (int i = 0; i < 400; ++i) words += "word ";
  script(words);
  engine_.delay_ms = 10;  // 4 s of tokens against a 1 s deadline
  const auto t0 = std::chrono::steady_clock::now();
  auto r = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                         {"enable_thinking", false}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 504) << r->body;
  EXPECT_NE(r->body.find("deadline"), std::string::npos);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.5);
  for (int i = 0; i < 200 && !engine_.cancelled; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(engine_.cancelled);
}

// A gRPC client that stops reading: the gateway's Write blocks on flow
// control; the deadline still ends the call and frees its slot.
TEST_F(GatewayShortDeadline, AClientThatStopsReadingCannotHoldASlot) {
  std::string words;
  for (int i = 0; i < 200000; ++i) words += "w ";
  script(words);
  // A small fixed receive window, so the gateway's writes block soon.
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16384);
  auto stub = v1::Gateway::NewStub(grpc::CreateCustomChannel(
      "unix:" + tmp_.file("gateway.sock"), grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext ctx;  // no deadline of its own
  v1::ChatRequest req;
  auto* m = req.add_messages();
  m->set_role("user");
  m->set_content("hi");
  req.set_enable_thinking(false);
  auto reader = stub->Chat(&ctx, req);  // never read
  bool ended = false;
  for (int i = 0; i < 1000 && !ended; ++i) {
    ended = core_->metrics().render().find("k3_requests_total{api=\"chat\",code=\"504\"} 1") !=
            std::string::npos;
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(ended) << core_->metrics().render();
  EXPECT_EQ(core_->admission().running(), 0);
  ctx.TryCancel();
}

}  // namespace
}  // namespace k3::gateway
