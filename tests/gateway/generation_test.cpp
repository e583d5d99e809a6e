// The gateway over a scripted engined (a fake EngineService on a unix socket
// that streams chosen token ids): the OpenAI HTTP API's tool calls (ids,
// streamed argument fragments, finish_reason), reasoning/content split, usage
// from engined's counters, stop strings cancelling engined, and engined's
// errors. The real model's output is random, so these paths need a script.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#define CPPHTTPLIB_OPENSSL_SUPPORT
#include <arpa/inet.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <fstream>
#include <mutex>
#include <nlohmann/json.hpp>
#include <sstream>
#include <thread>

#include "gateway/core/gateway_core.h"
#include "gateway/grpc/grpc_api.h"
#include "gateway/grpc/grpc_server.h"
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
    auto gs = start_grpc_server(gc, {grpc_api_.get()});
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
  double timeout_s_ = 600;
  std::string grpc_listen_;  // default: a unix socket in tmp_
  std::string grpc_address_;
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
  // Before the first token an SSE request fails as a plain HTTP error.
  EXPECT_EQ(s->status, 503);
  EXPECT_EQ(s->get_header_value("Content-Type"), "application/json");
  EXPECT_NE(json::parse(s->body)["error"]["message"].get<std::string>().find("expertd d0 is down"),
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

TEST_F(GatewayOverFakeEngine, StreamedDeltasNeverSplitAUtf8Character) {
  // "h€!" as one token per byte: the euro sign's three bytes arrive apart.
  auto byte_id = [&](unsigned char b) {
    for (int32_t id = 0; id < tok_->num_ranks(); ++id)
      if (tok_->token_bytes(id) == std::string(1, static_cast<char>(b))) return id;
    ADD_FAILURE() << "no single-byte token for " << int(b);
    return 0;
  };
  std::vector<int32_t> ids =
      *tok_->encode_markup("plan<|close|>think<|sep|><|open|>response<|sep|>");
  for (unsigned char b : std::string("h\xE2\x82\xAC!")) ids.push_back(byte_id(b));
  const auto tail = *tok_->encode_markup("<|close|>response<|sep|>");
  ids.insert(ids.end(), tail.begin(), tail.end());
  {
    std::lock_guard<std::mutex> lk(engine_.mu);
    engine_.script = ids;
  }
  auto r = post("/v1/chat/completions",
                {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"stream", true}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  std::string content;
  int pieces = 0;
  for (const json& e : events(r->body)) {
    if (e["choices"].empty() || !e["choices"][0]["delta"].contains("content")) continue;
    const std::string piece = e["choices"][0]["delta"]["content"];
    EXPECT_EQ(piece.find("\xEF\xBF\xBD"), std::string::npos) << "a replacement character";
    content += piece;
    pieces += piece.empty() ? 0 : 1;
  }
  EXPECT_EQ(content, "h\xE2\x82\xAC!");
  EXPECT_GE(pieces, 2);  // streamed, not one block
}

TEST_F(GatewayOverFakeEngine, AThinkingFollowUpContinuesWhatTheTurnReallyRan) {
  const std::string reply =
      "plan<|close|>think<|sep|><|open|>response<|sep|>Paris<|close|>response<|sep|>"
      "<|close|>message<|sep|><|end_of_msg|>";
  script(reply);
  json turn1 = {{"messages", {{{"role", "user"}, {"content", "Capital of France?"}}}}};
  auto r1 = post("/v1/chat/completions", turn1);
  ASSERT_TRUE(r1);
  ASSERT_EQ(r1->status, 200) << r1->body;
  const json a1 = json::parse(r1->body)["choices"][0]["message"];
  EXPECT_EQ(a1["content"], "Paris");
  std::vector<int32_t> ran;
  {
    std::lock_guard<std::mutex> lk(engine_.mu);
    ran.assign(engine_.last.prompt_ids().begin(), engine_.last.prompt_ids().end());
  }
  const auto reply_ids = *tok_->encode_markup(reply);
  ran.insert(ran.end(), reply_ids.begin(), reply_ids.end());

  // The client sends the reply back without its reasoning, as OpenAI's do.
  json turn2 = turn1;
  turn2["messages"].push_back({{"role", "assistant"}, {"content", a1["content"]}});
  turn2["messages"].push_back({{"role", "user"}, {"content", "And of Italy?"}});
  auto r2 = post("/v1/chat/completions", turn2);
  ASSERT_TRUE(r2);
  ASSERT_EQ(r2->status, 200) << r2->body;
  std::vector<int32_t> prompt2;
  std::vector<uint32_t> starts2;
  {
    std::lock_guard<std::mutex> lk(engine_.mu);
    prompt2.assign(engine_.last.prompt_ids().begin(), engine_.last.prompt_ids().end());
    starts2.assign(engine_.last.checkpoint_positions().begin(),
                   engine_.last.checkpoint_positions().end());
  }
  ASSERT_GT(prompt2.size(), ran.size());
  EXPECT_TRUE(std::equal(ran.begin(), ran.end(), prompt2.begin()))
      << "turn 2 does not start with the ids turn 1 ran";
  // The new message starts right after them.
  EXPECT_NE(std::find(starts2.begin(), starts2.end(), ran.size()), starts2.end());
  const std::string rest =
      *tok_->decode(std::vector<int32_t>(prompt2.begin() + ran.size(), prompt2.end()));
  EXPECT_NE(rest.find("And of Italy?"), std::string::npos) << rest;

  // Another reply in the history than the one generated: rendered as it is.
  turn2["messages"][1]["content"] = "Lyon";
  auto r3 = post("/v1/chat/completions", turn2);
  ASSERT_TRUE(r3);
  std::lock_guard<std::mutex> lk(engine_.mu);
  const std::string prompt3 = *tok_->decode(
      std::vector<int32_t>(engine_.last.prompt_ids().begin(), engine_.last.prompt_ids().end()));
  EXPECT_EQ(prompt3.find("plan"), std::string::npos);
  EXPECT_NE(prompt3.find("Lyon"), std::string::npos);
}

// ---- the HTTP API's routes and wire decisions ----

// A raw client: sends `req`, optionally hangs up after `hang_up_after_s`.
int raw_connect(int port, int rcvbuf = 0) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (rcvbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  return fd;
}
std::string raw_post(const std::string& path, const std::string& body) {
  return cat("POST ", path, " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",
             "Content-Length: ", body.size(), "\r\n\r\n", body);
}

TEST_F(GatewayOverFakeEngine, UnknownRoutesAndWrongMethods) {
  httplib::Client c("127.0.0.1", port_);
  auto r = c.Get("/v2/nothing");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "not_found");
  EXPECT_FALSE(r->get_header_value("X-Request-Id").empty());
  r = c.Get("/v1/chat/completions");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "POST");
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "method_not_allowed");
  r = c.Delete("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "GET");
}

TEST_F(GatewayOverFakeEngine, ModelByIdTokenizeDetokenizeAndApplyTemplate) {
  httplib::Client c("127.0.0.1", port_);
  auto r = c.Get("/v1/models/tiny");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["id"], "tiny");
  EXPECT_EQ(json::parse(r->body)["object"], "model");
  r = c.Get("/v1/models/other");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "model_not_found");

  auto t = post("/tokenize", {{"content", "hello world"}});
  ASSERT_TRUE(t);
  ASSERT_EQ(t->status, 200) << t->body;
  const auto ids = json::parse(t->body)["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(ids, *tok_->encode("hello world"));
  auto d = post("/detokenize", {{"tokens", ids}});
  ASSERT_TRUE(d);
  EXPECT_EQ(json::parse(d->body)["content"], "hello world");
  d = post("/detokenize", {{"tokens", {1, -3}}});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, 400);
  EXPECT_NE(d->body.find("tokens[1]"), std::string::npos);
  t = post("/tokenize", {{"text", "x"}});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->status, 400);
  EXPECT_NE(t->body.find("'content'"), std::string::npos);

  auto a = post("/apply-template", {{"messages", {{{"role", "user"}, {"content", "hi there"}}}},
                                    {"enable_thinking", false}});
  ASSERT_TRUE(a);
  ASSERT_EQ(a->status, 200) << a->body;
  const json j = json::parse(a->body);
  EXPECT_NE(j["prompt"].get<std::string>().find("hi there"), std::string::npos);
  // The ids are what a generation would prefill.
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(),
            *tok_->encode_markup(j["prompt"].get<std::string>()));
}

TEST_F(GatewayOverFakeEngine, AJsonBodyIsAcceptedWhateverItsContentType) {
  script("<|open|>response<|sep|>ok<|close|>response<|sep|>");
  httplib::Client c("127.0.0.1", port_);
  const json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                     {"enable_thinking", false}};
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/x-www-form-urlencoded");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(GatewayOverFakeEngine, MaxTokensBeyondTheContextIsRefused) {
  // The gateway learns engined's context from its first Describe poll.
  const auto t0 = std::chrono::steady_clock::now();
  while (core_->generator().max_context() == 0 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(core_->generator().max_context(), 4096);
  auto r = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                         {"max_tokens", 1000000000}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("'max_tokens'"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("4096"), std::string::npos) << r->body;
}

TEST_F(GatewayOverFakeEngine, ANonStreamingHangUpCancelsEnginedWithinASecond) {
  std::string words;
  for (int i = 0; i < 2000; ++i) words += "w ";
  script(words);
  engine_.delay_ms = 5;  // 10 s of tokens
  const int fd = raw_connect(port_);
  const std::string req = raw_post(
      "/v1/chat/completions",
      json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"enable_thinking", false}}
          .dump());
  ASSERT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // tokens are flowing
  ASSERT_FALSE(engine_.cancelled);
  const auto t0 = std::chrono::steady_clock::now();
  ::close(fd);
  while (!engine_.cancelled && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("non-streaming hang-up: engined cancelled after %.0f ms\n", took * 1000);
  EXPECT_TRUE(engine_.cancelled);
  EXPECT_LT(took, 1.0);
}

// A write deadline of half a second.
class GatewaySlowReader : public GatewayOverFakeEngine {
  void configure(GatewayConfig& c) override { c.write_timeout_s = 0.5; }
};

TEST_F(GatewaySlowReader, AnSseClientThatStopsReadingIsDroppedAndCancelled) {
  std::string words;
  for (int i = 0; i < 20000; ++i) words += "wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww ";
  script(words);
  const int fd = raw_connect(port_, /*rcvbuf=*/2048);
  const std::string req =
      raw_post("/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                            {"enable_thinking", false},
                                            {"stream", true}}
                                           .dump());
  ASSERT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  // Never reads. The cancel, the freed admission slot and the metric come
  // from different threads, moments apart: wait for all three.
  auto dropped = [&] {
    return engine_.cancelled && core_->admission().running() == 0 &&
           core_->metrics().render().find("k3_http_slow_readers_dropped_total 1") !=
               std::string::npos;
  };
  const auto t0 = std::chrono::steady_clock::now();
  while (!dropped() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(engine_.cancelled);
  EXPECT_EQ(core_->admission().running(), 0);
  EXPECT_NE(core_->metrics().render().find("k3_http_slow_readers_dropped_total 1"),
            std::string::npos);
  ::close(fd);
}

// API keys on, CORS for one origin.
class GatewayWithKeysAndCors : public GatewayOverFakeEngine {
  void configure(GatewayConfig& c) override {
    std::ofstream(tmp_.file("keys")) << "sk-test-key-1234567890\n";
    c.api_keys_file = tmp_.file("keys");
    c.cors_origin = "https://app.example";
  }
};

TEST_F(GatewayWithKeysAndCors, EveryEndpointButHealthNeedsAKey) {
  httplib::Client c("127.0.0.1", port_);
  for (const char* path : {"/metrics", "/v1/models", "/v1/models/tiny", "/nowhere"}) {
    auto r = c.Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << path;
  }
  auto t = c.Post("/tokenize", R"({"content": "x"})", "application/json");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->status, 401);
  // /health answers anonymous probes, but only up or not.
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(json::parse(h->body), json({{"status", "ok"}}));
  httplib::Headers auth = {{"Authorization", "Bearer sk-test-key-1234567890"}};
  h = c.Get("/health", auth);
  ASSERT_TRUE(h);
  EXPECT_TRUE(json::parse(h->body).contains("engined"));
  auto m = c.Get("/metrics", auth);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_EQ(m->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
}

TEST_F(GatewayWithKeysAndCors, PreflightsAreAnswered) {
  httplib::Client c("127.0.0.1", port_);
  auto r = c.Options("/v1/chat/completions");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Methods"), "POST");
  EXPECT_NE(r->get_header_value("Access-Control-Allow-Headers").find("Authorization"),
            std::string::npos);
}

// Both APIs over TLS with a self-signed certificate made now.
class GatewayOverTls : public GatewayOverFakeEngine {
  void configure(GatewayConfig& c) override {
    const std::string cmd =
        cat("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost ",
            "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout ", tmp_.file("key.pem"),
            " -out ", tmp_.file("cert.pem"), " 2>/dev/null");
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    c.tls_cert = tmp_.file("cert.pem");
    c.tls_key = tmp_.file("key.pem");
    grpc_listen_ = "127.0.0.1:0";
  }
};

TEST_F(GatewayOverTls, HttpsAndGrpcOverTls) {
  httplib::SSLClient c("127.0.0.1", port_);
  c.set_ca_cert_path(tmp_.file("cert.pem").c_str());
  c.enable_server_certificate_verification(true);
  auto r = c.Get("/v1/models");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["data"][0]["id"], "tiny");
  // Plaintext on the TLS port gets nowhere.
  httplib::Client plain("127.0.0.1", port_);
  plain.set_read_timeout(2, 0);
  auto p = plain.Get("/v1/models");
  EXPECT_TRUE(!p || p->status != 200);

  std::stringstream ss;
  ss << std::ifstream(tmp_.file("cert.pem")).rdbuf();
  grpc::SslCredentialsOptions so;
  so.pem_root_certs = ss.str();
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  auto stub = v1::Gateway::NewStub(
      grpc::CreateCustomChannel(grpc_address_, grpc::SslCredentials(so), args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListModelsRequest req;
  v1::ListModelsResponse out;
  const grpc::Status s = stub->ListModels(&ctx, req, &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(out.models(0).id(), "tiny");
  // An insecure channel does not get an answer.
  auto insecure =
      v1::Gateway::NewStub(grpc::CreateChannel(grpc_address_, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx2;
  ctx2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  EXPECT_FALSE(insecure->ListModels(&ctx2, req, &out).ok());
}

TEST(GatewayConfigTls, PlaintextOnANonLoopbackAddressIsRefused) {
  GatewayConfig c;
  c.model_dir = "m";
  c.http_listen = "0.0.0.0:8080";
  Status s = c.validate();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(msg(s).find("--allow-plaintext"), std::string::npos);
  c.allow_plaintext = true;
  EXPECT_TRUE(c.validate().ok());
  c.allow_plaintext = false;
  c.http_listen = "127.0.0.1:8080";
  c.grpc_listen = "[::]:50051";
  EXPECT_FALSE(c.validate().ok());
  c.grpc_listen = "unix:/tmp/x.sock";
  EXPECT_TRUE(c.validate().ok());
}

}  // namespace
}  // namespace k3::gateway
