// POST /v1/responses over a scripted engined (tests/gateway/fake_engine_fixture.h):
// engined gets exactly the request the equivalent chat completion sends;
// reasoning, text and tool calls come back as output items, streamed as the
// Responses events with progress comments between them; engined's errors,
// a client hanging up, API keys, metrics per route, and the stored-response
// routes refused.
#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include "tests/gateway/fake_engine_fixture.h"

namespace k3::gateway {
namespace {

using namespace fake_engine;

const char* kToolCallOutput =
    "plan<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|>"
    "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"0\"<|sep|>"
    "<|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|>"
    "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>";

const char* kTextOutput =
    "hmm<|close|>think<|sep|><|open|>response<|sep|>Sunny.<|close|>response<|sep|>"
    "<|close|>message<|sep|><|end_of_msg|>";

const json kParameters = {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}};

json responses_tool_request() {
  return {{"model", "tiny"},
          {"instructions", "You are a weather bot."},
          {"input", "Weather in Paris?"},
          {"tools", {{{"type", "function"}, {"name", "get_weather"}, {"parameters", kParameters}}}},
          {"tool_choice", "required"},
          {"max_output_tokens", 100},
          {"temperature", 0.5},
          {"seed", 42}};
}

json chat_tool_request() {
  return {{"model", "tiny"},
          {"messages",
           {{{"role", "system"}, {"content", "You are a weather bot."}},
            {{"role", "user"}, {"content", "Weather in Paris?"}}}},
          {"tools",
           {{{"type", "function"},
             {"function", {{"name", "get_weather"}, {"parameters", kParameters}}}}}},
          {"tool_choice", "required"},
          {"max_tokens", 100},
          {"temperature", 0.5},
          {"seed", 42}};
}

// An SSE body's events: each "event: T" line's name and its data, which
// must name the same type.
std::vector<json> typed_events(const std::string& body) {
  std::vector<json> out;
  size_t pos = 0;
  while ((pos = body.find("event: ", pos)) != std::string::npos) {
    const size_t nl = body.find('\n', pos);
    const std::string type = body.substr(pos + 7, nl - pos - 7);
    EXPECT_EQ(body.compare(nl + 1, 6, "data: "), 0) << body.substr(pos, 80);
    const size_t end = body.find("\n\n", nl);
    json data = json::parse(body.substr(nl + 7, end - nl - 7));
    EXPECT_EQ(data["type"], type);
    out.push_back(std::move(data));
    pos = end;
  }
  return out;
}

std::vector<std::string> types_of(const std::vector<json>& events) {
  std::vector<std::string> out;
  for (const json& e : events) out.push_back(e["type"]);
  return out;
}

TEST_F(GatewayOverFakeEngine, ResponsesRunTheChatRequestAndReturnItems) {
  script(kToolCallOutput);
  auto chat = post("/v1/chat/completions", chat_tool_request());
  ASSERT_TRUE(chat);
  ASSERT_EQ(chat->status, 200) << chat->body;
  v1::GenerateRequest chat_sent;
  {
    std::lock_guard<std::mutex> lk(engine_.mu);
    chat_sent = engine_.last;
  }
  auto r = post("/v1/responses", responses_tool_request());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  {
    // One code path: engined is asked the same thing, token for token
    // (prompt, sampling and seed, limits, stop ids), but for its id and the
    // session it prefers.
    v1::GenerateRequest a = engine_.last, b = chat_sent;
    EXPECT_GT(a.prompt_ids_size(), 0);
    for (v1::GenerateRequest* g : {&a, &b}) {
      g->clear_request_id();
      g->clear_session_hint();
    }
    EXPECT_EQ(a.DebugString(), b.DebugString());
  }
  const json j = json::parse(r->body);
  EXPECT_EQ(j["object"], "response");
  EXPECT_EQ(j["id"].get<std::string>().rfind("resp_", 0), 0u);
  EXPECT_EQ(j["status"], "completed");
  EXPECT_EQ(j["instructions"], "You are a weather bot.");
  EXPECT_EQ(j["max_output_tokens"], 100);
  EXPECT_EQ(j["tool_choice"], "required");
  EXPECT_EQ(j["tools"][0]["name"], "get_weather");
  ASSERT_EQ(j["output"].size(), 2u) << j.dump(1);
  EXPECT_EQ(j["output"][0]["type"], "reasoning");
  EXPECT_EQ(j["output"][0]["content"][0]["text"], "plan");
  const json& call = j["output"][1];
  EXPECT_EQ(call["type"], "function_call");
  EXPECT_EQ(call["name"], "get_weather");
  EXPECT_EQ(call["call_id"].get<std::string>().rfind("call_", 0), 0u);
  EXPECT_EQ(json::parse(call["arguments"].get<std::string>()), json({{"city", "Paris"}}));
  EXPECT_EQ(j["usage"]["input_tokens_details"]["cached_tokens"], 10);
  EXPECT_EQ(j["usage"]["output_tokens"], static_cast<int>(engine_.script.size()));
  // The tokens that carried reasoning text: "plan"'s.
  EXPECT_EQ(j["usage"]["output_tokens_details"]["reasoning_tokens"], tok_->encode("plan")->size());
  EXPECT_EQ(j["usage"]["input_tokens"], json::parse(chat->body)["usage"]["prompt_tokens"]);
  const std::string metrics = core_->metrics().render();
  EXPECT_NE(metrics.find("k3_requests_total{api=\"responses\",code=\"200\"} 1"), std::string::npos)
      << metrics;
}

TEST_F(GatewayOverFakeEngine, ResponsesStreamTheEventSequenceWithProgress) {
  script(kTextOutput);
  v1::GenerateProgress p;
  p.set_done(8);
  p.set_total(16);
  engine_.progress = {p};
  auto r = post("/v1/responses", {{"input", "weather?"}, {"stream", true}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  // Progress as SSE comments, as chat streams send them; no [DONE].
  EXPECT_NE(r->body.find("\n: prefill 8/16"), std::string::npos) << r->body;
  EXPECT_EQ(r->body.find("[DONE]"), std::string::npos);
  const auto ev = typed_events(r->body);
  std::vector<std::string> types = types_of(ev);
  // The deltas' count depends on the tokenizer: fold runs of them.
  types.erase(std::unique(types.begin(), types.end()), types.end());
  EXPECT_EQ(types, (std::vector<std::string>{
                       "response.created", "response.in_progress", "response.output_item.added",
                       "response.content_part.added", "response.reasoning_text.delta",
                       "response.reasoning_text.done", "response.content_part.done",
                       "response.output_item.done", "response.output_item.added",
                       "response.content_part.added", "response.output_text.delta",
                       "response.output_text.done", "response.content_part.done",
                       "response.output_item.done", "response.completed"}));
  for (size_t i = 0; i < ev.size(); ++i) EXPECT_EQ(ev[i]["sequence_number"], i);
  std::string text;
  for (const json& e : ev)
    if (e["type"] == "response.output_text.delta") text += e["delta"].get<std::string>();
  EXPECT_EQ(text, "Sunny.");
  const json& done = ev.back()["response"];
  EXPECT_EQ(done["status"], "completed");
  EXPECT_EQ(done["output"][1]["content"][0]["text"], "Sunny.");
  EXPECT_EQ(done["usage"]["input_tokens_details"]["cached_tokens"], 10);
}

TEST_F(GatewayOverFakeEngine, ResponsesStreamToolCallArguments) {
  script(kToolCallOutput);
  json req = responses_tool_request();
  req["stream"] = true;
  auto r = post("/v1/responses", req);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto ev = typed_events(r->body);
  std::string args, done_args;
  for (const json& e : ev) {
    if (e["type"] == "response.function_call_arguments.delta")
      args += e["delta"].get<std::string>();
    if (e["type"] == "response.function_call_arguments.done") done_args = e["arguments"];
  }
  EXPECT_EQ(json::parse(args), json({{"city", "Paris"}}));
  EXPECT_EQ(done_args, args);
  EXPECT_EQ(ev.back()["type"], "response.completed");
  EXPECT_EQ(ev.back()["response"]["output"][1]["arguments"], args);
}

TEST_F(GatewayOverFakeEngine, ResponsesErrorsAreOpenAiErrorsOrResponseFailed) {
  auto r = post("/v1/responses", {{"input", "x"}, {"previous_response_id", "resp_1"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  json err = json::parse(r->body)["error"];
  EXPECT_EQ(err["param"], "previous_response_id");
  EXPECT_EQ(err["type"], "invalid_request_error");

  httplib::Client c("127.0.0.1", port_);
  auto g = c.Get("/v1/responses/resp_1");
  ASSERT_TRUE(g);
  EXPECT_EQ(g->status, 404);
  EXPECT_NE(g->body.find("this server keeps no responses"), std::string::npos) << g->body;

  engine_.fail = absl::UnavailableError("engine down");
  r = post("/v1/responses", {{"input", "x"}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  // A stream opens at admission: the failure closes the response.
  r = post("/v1/responses", {{"input", "x"}, {"stream", true}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  const auto ev = typed_events(r->body);
  ASSERT_GE(ev.size(), 3u) << r->body;
  EXPECT_EQ(ev[0]["type"], "response.created");
  EXPECT_EQ(ev.back()["type"], "response.failed");
  EXPECT_EQ(ev.back()["response"]["status"], "failed");
  EXPECT_NE(ev.back()["response"]["error"]["message"].get<std::string>().find("engine down"),
            std::string::npos);
}

TEST_F(GatewayOverFakeEngine, AResponsesStreamHangUpCancelsEngined) {
  std::string words;
  for (int i = 0; i < 2000; ++i) words += "w ";
  script(words);
  engine_.delay_ms = 5;  // 10 s of tokens
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port_));
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  const std::string body =
      json{{"input", "hi"}, {"stream", true}, {"reasoning", {{"effort", "none"}}}}.dump();
  const std::string req =
      cat("POST /v1/responses HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",
          "Content-Length: ", body.size(), "\r\n\r\n", body);
  ASSERT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  char buf[4096];
  std::string got;
  while (got.find("response.output_text.delta") == std::string::npos) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    ASSERT_GT(n, 0) << got;
    got.append(buf, static_cast<size_t>(n));
  }
  ASSERT_FALSE(engine_.cancelled);
  ::close(fd);
  for (int i = 0; i < 500 && !engine_.cancelled; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(engine_.cancelled);
  for (int i = 0; i < 500 && core_->admission().running() > 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_EQ(core_->admission().running(), 0);
}

// The engine request of the last call, but for its id and session hint.
std::string engine_request_of(FakeEngine& engine) {
  std::lock_guard<std::mutex> lk(engine.mu);
  v1::GenerateRequest g = engine.last;
  g.clear_request_id();
  g.clear_session_hint();
  return g.DebugString();
}

// Unknown fields follow the one policy of every route (docs/openai-api.md,
// "Unknown fields"): accepted, named in x-k3-ignored-fields on plain and
// streamed replies, and engined is asked exactly what it is asked without
// them.
TEST_F(GatewayOverFakeEngine, ResponsesIgnoreAndNameUnknownFields) {
  script(kToolCallOutput);
  auto plain = post("/v1/responses", responses_tool_request());
  ASSERT_TRUE(plain);
  ASSERT_EQ(plain->status, 200) << plain->body;
  EXPECT_FALSE(plain->has_header("x-k3-ignored-fields"));
  const std::string without = engine_request_of(engine_);
  json body = responses_tool_request();
  body["x_client_tag"] = "codex";
  body["tools"][0]["x_tool_hint"] = 1;
  body["input"] = {{{"role", "user"}, {"content", "Weather in Paris?"}, {"x_item_note", "n"}}};
  auto r = post("/v1/responses", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("x-k3-ignored-fields"),
            "x_client_tag,input[0].x_item_note,tools[0].x_tool_hint");
  EXPECT_EQ(engine_request_of(engine_), without);
  body["stream"] = true;
  auto sse = post("/v1/responses", body);
  ASSERT_TRUE(sse);
  ASSERT_EQ(sse->status, 200) << sse->body;
  EXPECT_EQ(sse->get_header_value("x-k3-ignored-fields"),
            "x_client_tag,input[0].x_item_note,tools[0].x_tool_hint");
}

// gateway --strict-fields: an unknown field is refused by its path.
class ResponsesStrictFields : public GatewayOverFakeEngine {
  void configure(GatewayConfig& c) override { c.strict_fields = true; }
};

TEST_F(ResponsesStrictFields, RefuseAnUnknownFieldByItsPath) {
  script(kTextOutput);
  json body = responses_tool_request();
  body["tools"][0]["x_tool_hint"] = 1;
  auto r = post("/v1/responses", body);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["error"]["param"], "tools[0].x_tool_hint");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("docs/responses-api.md"),
            std::string::npos)
      << r->body;
}

// API keys on: /v1/responses needs one, as every API route.
class ResponsesWithKeys : public GatewayOverFakeEngine {
  void configure(GatewayConfig& c) override {
    std::ofstream(tmp_.file("keys")) << "sk-test-key-1234567890\n";
    std::filesystem::permissions(tmp_.file("keys"), std::filesystem::perms(0600));
    c.api_keys_file = tmp_.file("keys");
  }
};

TEST_F(ResponsesWithKeys, NeedAKey) {
  script(kTextOutput);
  httplib::Client c("127.0.0.1", port_);
  const std::string body = json{{"input", "hi"}}.dump();
  auto r = c.Post("/v1/responses", body, "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 401);
  r = c.Post("/v1/responses", {{"Authorization", "Bearer sk-test-key-1234567890"}}, body,
             "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

}  // namespace
}  // namespace k3::gateway
