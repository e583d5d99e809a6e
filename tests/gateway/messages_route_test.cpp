// The Messages API's routes over a scripted engined
// (tests/gateway/fake_engine_fixture.h, gateway/http/messages_route.h): the
// same engine request as the equivalent chat completion, tool_use blocks
// (whole and streamed), stop sequences, thinking cut at max_tokens, errors in
// Anthropic's shape, count_tokens, API keys as x-api-key, the per-route
// metric and cancellation when the client hangs up.
#include <fstream>

#include "tests/gateway/fake_engine_fixture.h"

namespace k3::gateway {
namespace {

using namespace fake_engine;

const char* kToolCallOutput =
    "plan<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|>"
    "<|open|>tools<|sep|><|open|>call tool=\"get_weather\" index=\"0\"<|sep|>"
    "<|open|>argument key=\"city\" type=\"string\"<|sep|>Paris<|close|>argument<|sep|>"
    "<|open|>argument key=\"days\" type=\"number\"<|sep|>3<|close|>argument<|sep|>"
    "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>";

const json kWeatherSchema = {
    {"type", "object"},
    {"properties", {{"city", {{"type", "string"}}}, {"days", {{"type", "number"}}}}}};

json tool_request() {
  return {
      {"model", "tiny"},
      {"max_tokens", 2000},
      {"system", "You are a weather bot."},
      {"messages", {{{"role", "user"}, {"content", "Weather in Paris?"}}}},
      {"tools",
       {{{"name", "get_weather"}, {"description", "Weather"}, {"input_schema", kWeatherSchema}}}},
      {"tool_choice", {{"type", "any"}}},
      {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}},
      {"temperature", 0.5},
      {"seed", 42}};
}

struct Sse {
  std::string name;
  json data;
};
// The named events of a Messages stream.
std::vector<Sse> sse_events(const std::string& body) {
  std::vector<Sse> out;
  size_t pos = 0;
  while ((pos = body.find("event: ", pos)) != std::string::npos) {
    const size_t nl = body.find('\n', pos);
    const size_t end = body.find("\n\n", nl);
    out.push_back(
        {body.substr(pos + 7, nl - pos - 7), json::parse(body.substr(nl + 7, end - nl - 7))});
    pos = end;
  }
  return out;
}

v1::GenerateRequest last_request(FakeEngine& engine) {
  std::lock_guard<std::mutex> lk(engine.mu);
  return engine.last;
}

TEST_F(GatewayOverFakeEngine, MessagesRunTheSameEngineRequestAsTheEquivalentChat) {
  script("The answer.<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>");
  const json chat = {
      {"model", "tiny"},
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}}},
      {"max_tokens", 16},
      {"temperature", 0.7},
      {"top_k", 5},
      {"seed", 1234},
      {"thinking", false}};
  auto c = post("/v1/chat/completions", chat);
  ASSERT_TRUE(c);
  ASSERT_EQ(c->status, 200) << c->body;
  const v1::GenerateRequest from_chat = last_request(engine_);
  const json messages = {{"model", "tiny"},
                         {"system", "Be brief."},
                         {"messages", {{{"role", "user"}, {"content", "Hi"}}}},
                         {"max_tokens", 16},
                         {"temperature", 0.7},
                         {"top_k", 5},
                         {"seed", 1234}};
  auto m = post("/v1/messages", messages);
  ASSERT_TRUE(m);
  ASSERT_EQ(m->status, 200) << m->body;
  const v1::GenerateRequest from_messages = last_request(engine_);
  EXPECT_EQ(
      std::vector<int32_t>(from_chat.prompt_ids().begin(), from_chat.prompt_ids().end()),
      std::vector<int32_t>(from_messages.prompt_ids().begin(), from_messages.prompt_ids().end()));
  EXPECT_EQ(from_chat.max_tokens(), from_messages.max_tokens());
  EXPECT_EQ(from_chat.sampling().SerializeAsString(), from_messages.sampling().SerializeAsString());
  const json cj = json::parse(c->body);
  const json mj = json::parse(m->body);
  EXPECT_EQ(mj["content"], json::parse(R"([{"type": "text", "text": "The answer."}])"));
  EXPECT_EQ(cj["choices"][0]["message"]["content"], "The answer.");
  EXPECT_EQ(mj["stop_reason"], "end_turn");
  EXPECT_EQ(mj["type"], "message");
  EXPECT_EQ(mj["role"], "assistant");
  EXPECT_EQ(mj["model"], "tiny");
  EXPECT_EQ(mj["id"].get<std::string>().rfind("msg_", 0), 0u);
  // The reused prefix (the fake engine's 7 reused + 3 restored) is the
  // cache read; input_tokens the rest.
  const int64_t cached = cj["usage"]["prompt_tokens_details"]["cached_tokens"];
  EXPECT_EQ(cached, 10);
  EXPECT_EQ(mj["usage"]["cache_read_input_tokens"], cached);
  EXPECT_EQ(mj["usage"]["input_tokens"].get<int64_t>() + cached,
            cj["usage"]["prompt_tokens"].get<int64_t>());
  EXPECT_EQ(mj["usage"]["output_tokens"], cj["usage"]["completion_tokens"]);

  // count_tokens: the prompt's tokens.
  json count = messages;
  for (const char* k : {"max_tokens", "temperature", "top_k", "seed"}) count.erase(k);
  auto n = post("/v1/messages/count_tokens", count);
  ASSERT_TRUE(n);
  ASSERT_EQ(n->status, 200) << n->body;
  EXPECT_EQ(json::parse(n->body), json({{"input_tokens", from_messages.prompt_ids_size()}}));

  // Counted per route.
  httplib::Client mc("127.0.0.1", port_);
  auto metrics = mc.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_NE(metrics->body.find("k3_requests_total{api=\"messages\",code=\"200\"} 1"),
            std::string::npos)
      << metrics->body;
}

TEST_F(GatewayOverFakeEngine, MessagesToolUseComesBackAsBlocks) {
  script(kToolCallOutput);
  auto r = post("/v1/messages", tool_request());
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["stop_reason"], "tool_use");
  ASSERT_EQ(j["content"].size(), 2u) << j.dump(1);
  EXPECT_EQ(j["content"][0],
            json::parse(R"({"type":"thinking","thinking":"plan","signature":""})"));
  EXPECT_EQ(j["content"][1]["type"], "tool_use");
  EXPECT_EQ(j["content"][1]["name"], "get_weather");
  EXPECT_EQ(j["content"][1]["input"], json::parse(R"({"city": "Paris", "days": 3})"));
  // tool_choice any is the chat route's required; thinking enabled opens the
  // think channel.
  const v1::GenerateRequest req = last_request(engine_);
  EXPECT_EQ(req.sampling().constraint().tool_choice(), v1::OutputConstraint::TOOL_CHOICE_REQUIRED);
  EXPECT_TRUE(req.sampling().constraint().thinking());
  EXPECT_EQ(req.sampling().constraint().think_budget_tokens(), 1024u);

  // The round trip: the tool_use and its tool_result sent back render.
  json next = tool_request();
  next["messages"].push_back({{"role", "assistant"}, {"content", j["content"]}});
  next["messages"].push_back({{"role", "user"},
                              {"content",
                               {{{"type", "tool_result"},
                                 {"tool_use_id", j["content"][1]["id"]},
                                 {"content", "sunny"}}}}});
  next["tool_choice"] = {{"type", "auto"}};
  script(
      "plan<|close|>think<|sep|><|open|>response<|sep|>Sunny.<|close|>response<|sep|>"
      "<|close|>message<|sep|><|end_of_msg|>");
  auto r2 = post("/v1/messages", next);
  ASSERT_TRUE(r2);
  ASSERT_EQ(r2->status, 200) << r2->body;
  const json j2 = json::parse(r2->body);
  EXPECT_EQ(j2["stop_reason"], "end_turn");
  EXPECT_EQ(j2["content"].back(), json::parse(R"({"type": "text", "text": "Sunny."})"));
  const auto prompt = last_request(engine_).prompt_ids();
  auto text = tok_->decode(std::vector<int32_t>(prompt.begin(), prompt.end()));
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("sunny"), std::string::npos) << *text;
}

TEST_F(GatewayOverFakeEngine, MessagesStreamToolUseAsInputJsonDeltas) {
  script(kToolCallOutput);
  json req = tool_request();
  req["stream"] = true;
  auto r = post("/v1/messages", req);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/event-stream");
  const auto ev = sse_events(r->body);
  ASSERT_GE(ev.size(), 8u) << r->body;
  EXPECT_EQ(ev.front().name, "message_start");
  EXPECT_EQ(ev.back().name, "message_stop");
  const Sse& delta = ev[ev.size() - 2];
  EXPECT_EQ(delta.name, "message_delta");
  EXPECT_EQ(delta.data["delta"]["stop_reason"], "tool_use");
  std::string thinking, json_text, tool_name;
  std::vector<std::string> starts;
  for (const Sse& e : ev) {
    if (e.name == "content_block_start") starts.push_back(e.data["content_block"]["type"]);
    if (e.name == "content_block_start" && e.data["content_block"]["type"] == "tool_use")
      tool_name = e.data["content_block"]["name"];
    if (e.name != "content_block_delta") continue;
    if (e.data["delta"]["type"] == "thinking_delta")
      thinking += e.data["delta"]["thinking"].get<std::string>();
    if (e.data["delta"]["type"] == "input_json_delta")
      json_text += e.data["delta"]["partial_json"].get<std::string>();
  }
  EXPECT_EQ(starts, (std::vector<std::string>{"thinking", "tool_use"}));
  EXPECT_EQ(thinking, "plan");
  EXPECT_EQ(tool_name, "get_weather");
  EXPECT_EQ(json::parse(json_text), json::parse(R"({"city": "Paris", "days": 3})"));
}

// thinking.budget_tokens reaches engined as the constraint's think budget:
// with nothing else to enforce, a constraint of the think channel alone
// (tools auto, whose schemas are not compiled); none without thinking, and
// none on the chat route (which has no budget).
TEST_F(GatewayOverFakeEngine, MessagesThinkingBudgetReachesTheEngine) {
  script(
      "plan<|close|>think<|sep|><|open|>response<|sep|>Paris<|close|>response<|sep|>"
      "<|close|>message<|sep|><|end_of_msg|>");
  json body = tool_request();
  body.erase("tool_choice");
  body["tools"][0]["input_schema"]["properties"]["city"]["format"] = "uri";
  body["thinking"]["budget_tokens"] = 1500;
  auto r = post("/v1/messages", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  v1::GenerateRequest req = last_request(engine_);
  ASSERT_TRUE(req.sampling().has_constraint());
  const v1::OutputConstraint& c = req.sampling().constraint();
  EXPECT_TRUE(c.thinking());
  EXPECT_EQ(c.think_budget_tokens(), 1500u);
  EXPECT_EQ(c.body(), v1::OutputConstraint::TEXT);
  EXPECT_EQ(c.tool_choice(), v1::OutputConstraint::TOOL_CHOICE_AUTO);
  EXPECT_FALSE(c.single_tool_call());
  EXPECT_EQ(c.tools_size(), 0);

  body["thinking"] = {{"type", "disabled"}};
  script("Paris<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>");
  r = post("/v1/messages", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_FALSE(last_request(engine_).sampling().has_constraint());

  // Out of bounds: a 400 naming the field.
  body["thinking"] = {{"type", "enabled"}, {"budget_tokens", 0}};
  r = post("/v1/messages", body);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("thinking.budget_tokens"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("invalid_request_error"), std::string::npos) << r->body;
  body["thinking"]["budget_tokens"] = 2000;
  r = post("/v1/messages", body);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("less than 'max_tokens'"), std::string::npos) << r->body;
}

// A follow-up that sends the reply back (its thinking and text blocks)
// starts with the ids the first turn ran: engined continues the session.
TEST_F(GatewayOverFakeEngine, AMessagesFollowUpContinuesTheSession) {
  const std::string reply =
      "plan<|close|>think<|sep|><|open|>response<|sep|>Paris<|close|>response<|sep|>"
      "<|close|>message<|sep|><|end_of_msg|>";
  script(reply);
  json turn1 = {{"model", "tiny"},
                {"max_tokens", 2000},
                {"thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}},
                {"messages", {{{"role", "user"}, {"content", "Capital of France?"}}}}};
  auto r1 = post("/v1/messages", turn1);
  ASSERT_TRUE(r1);
  ASSERT_EQ(r1->status, 200) << r1->body;
  const json a1 = json::parse(r1->body);
  ASSERT_EQ(a1["content"].size(), 2u) << a1.dump();
  std::vector<int32_t> ran;
  {
    std::lock_guard<std::mutex> lk(engine_.mu);
    ran.assign(engine_.last.prompt_ids().begin(), engine_.last.prompt_ids().end());
  }
  const auto reply_ids = *tok_->encode_markup(reply);
  ran.insert(ran.end(), reply_ids.begin(), reply_ids.end());
  json turn2 = turn1;
  turn2["messages"].push_back({{"role", "assistant"}, {"content", a1["content"]}});
  turn2["messages"].push_back({{"role", "user"}, {"content", "And of Italy?"}});
  auto r2 = post("/v1/messages", turn2);
  ASSERT_TRUE(r2);
  ASSERT_EQ(r2->status, 200) << r2->body;
  std::vector<int32_t> prompt2;
  {
    std::lock_guard<std::mutex> lk(engine_.mu);
    prompt2.assign(engine_.last.prompt_ids().begin(), engine_.last.prompt_ids().end());
  }
  ASSERT_GT(prompt2.size(), ran.size());
  EXPECT_TRUE(std::equal(ran.begin(), ran.end(), prompt2.begin()))
      << "turn 2 does not start with the ids turn 1 ran";
}

TEST_F(GatewayOverFakeEngine, MessagesStopSequenceAndMaxTokens) {
  script("Hello world. STOP and more<|close|>response<|sep|>");
  engine_.delay_ms = 5;
  json req = {{"model", "tiny"},
              {"max_tokens", 50},
              {"messages", {{{"role", "user"}, {"content", "hi"}}}},
              {"stop_sequences", {"NEVER", "STOP"}}};
  auto r = post("/v1/messages", req);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["stop_reason"], "stop_sequence");
  EXPECT_EQ(j["stop_sequence"], "STOP");
  EXPECT_EQ(j["content"][0]["text"], "Hello world. ");
  req["stream"] = true;
  r = post("/v1/messages", req);
  ASSERT_TRUE(r);
  const auto ev = sse_events(r->body);
  ASSERT_GE(ev.size(), 2u);
  EXPECT_EQ(ev[ev.size() - 2].data["delta"]["stop_reason"], "stop_sequence");
  EXPECT_EQ(ev[ev.size() - 2].data["delta"]["stop_sequence"], "STOP");
}

TEST_F(GatewayOverFakeEngine, MessagesErrorsTakeAnthropicsShape) {
  auto r = post("/v1/messages",
                {{"model", "tiny"}, {"messages", {{{"role", "user"}, {"content", "x"}}}}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  const json j = json::parse(r->body);
  EXPECT_EQ(j["type"], "error");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("max_tokens"), std::string::npos);
  r = post("/v1/messages", {{"model", "claude-sonnet"},
                            {"max_tokens", 5},
                            {"messages", {{{"role", "user"}, {"content", "x"}}}}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "not_found_error");
  engine_.fail = absl::UnavailableError("engined is busy");
  r = post(
      "/v1/messages",
      {{"model", "tiny"}, {"max_tokens", 5}, {"messages", {{{"role", "user"}, {"content", "x"}}}}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 503) << r->body;
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "overloaded_error");
}

TEST_F(GatewayOverFakeEngine, AMessagesStreamCancelsEnginedWhenTheClientHangsUp) {
  std::string text;
  for (int i = 0; i < 400; ++i) text += "word ";
  script(text);
  engine_.delay_ms = 20;
  httplib::Client c("127.0.0.1", port_);
  int chunks = 0;
  json req = {{"model", "tiny"},
              {"max_tokens", 1000},
              {"stream", true},
              {"messages", {{{"role", "user"}, {"content", "talk"}}}}};
  httplib::Request hr;
  hr.method = "POST";
  hr.path = "/v1/messages";
  hr.body = req.dump();
  hr.set_header("Content-Type", "application/json");
  // Hang up after a few pieces of text.
  hr.content_receiver = [&](const char*, size_t, uint64_t, uint64_t) { return ++chunks < 5; };
  c.send(hr);
  for (int i = 0; i < 500 && !engine_.cancelled; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(engine_.cancelled);
}

// Progress every 50 ms: a quiet stream hears pings.
class MessagesProgress : public GatewayOverFakeEngine {
  void configure(GatewayConfig& c) override { c.progress_interval_s = 0.05; }
};

TEST_F(MessagesProgress, AQuietStreamHearsPingsAfterMessageStart) {
  script("Hello.");
  engine_.pause_ms = 600;  // silent before the first token
  auto r = post("/v1/messages", {{"model", "tiny"},
                                 {"max_tokens", 10},
                                 {"stream", true},
                                 {"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const auto ev = sse_events(r->body);
  ASSERT_GE(ev.size(), 3u);
  EXPECT_EQ(ev[0].name, "message_start");
  int pings = 0;
  for (const Sse& e : ev)
    if (e.name == "ping") {
      ++pings;
      EXPECT_TRUE(e.data["k3_progress"].contains("phase")) << e.data;
    }
  EXPECT_GE(pings, 1) << r->body;
  EXPECT_EQ(ev.back().name, "message_stop");
}

// Unknown fields follow the one policy of every route: accepted, named in
// x-k3-ignored-fields (plain, streamed, count_tokens), engined asked
// exactly what it is asked without them; refused by path under
// --strict-fields, in Anthropic's error shape.
TEST_F(GatewayOverFakeEngine, MessagesIgnoreAndNameUnknownFields) {
  script("ok<|close|>response<|sep|>");
  json body = {{"model", "tiny"},
               {"max_tokens", 5},
               {"seed", 7},
               {"messages", {{{"role", "user"}, {"content", "x"}}}}};
  auto plain = post("/v1/messages", body);
  ASSERT_TRUE(plain);
  ASSERT_EQ(plain->status, 200) << plain->body;
  EXPECT_FALSE(plain->has_header("x-k3-ignored-fields"));
  std::string without;
  {
    std::lock_guard<std::mutex> lk(engine_.mu);
    v1::GenerateRequest g = engine_.last;
    g.clear_request_id();
    g.clear_session_hint();
    without = g.DebugString();
  }
  body["x_client_tag"] = "claude-code";
  body["messages"][0]["x_turn_note"] = 1;
  body["frequency_penalty"] = 0.5;
  auto r = post("/v1/messages", body);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  // The body's own fields first (json sorts keys), then the nested ones.
  const std::string named = "frequency_penalty,x_client_tag,messages[0].x_turn_note";
  EXPECT_EQ(r->get_header_value("x-k3-ignored-fields"), named);
  {
    std::lock_guard<std::mutex> lk(engine_.mu);
    v1::GenerateRequest g = engine_.last;
    g.clear_request_id();
    g.clear_session_hint();
    EXPECT_EQ(g.DebugString(), without);
  }
  body["stream"] = true;
  auto sse = post("/v1/messages", body);
  ASSERT_TRUE(sse);
  ASSERT_EQ(sse->status, 200) << sse->body;
  EXPECT_EQ(sse->get_header_value("x-k3-ignored-fields"), named);
  body.erase("stream");
  auto count = post("/v1/messages/count_tokens", body);
  ASSERT_TRUE(count);
  ASSERT_EQ(count->status, 200) << count->body;
  EXPECT_EQ(count->get_header_value("x-k3-ignored-fields"),
            "frequency_penalty,max_tokens,seed,x_client_tag,messages[0].x_turn_note");
}

class MessagesStrictFields : public GatewayOverFakeEngine {
  void configure(GatewayConfig& c) override { c.strict_fields = true; }
};

TEST_F(MessagesStrictFields, RefuseAnUnknownFieldByItsPath) {
  script("ok<|close|>response<|sep|>");
  auto r = post("/v1/messages", {{"model", "tiny"},
                                 {"max_tokens", 5},
                                 {"messages", {{{"role", "user"}, {"content", "x"}, {"x", 1}}}}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  const json j = json::parse(r->body);
  EXPECT_EQ(j["type"], "error");
  EXPECT_EQ(j["error"]["type"], "invalid_request_error");
  EXPECT_NE(j["error"]["message"].get<std::string>().find("'messages[0].x'"), std::string::npos)
      << r->body;
  EXPECT_NE(j["error"]["message"].get<std::string>().find("docs/messages-api.md"),
            std::string::npos)
      << r->body;
}

// API keys on.
class MessagesWithKeys : public GatewayOverFakeEngine {
  void configure(GatewayConfig& c) override {
    std::ofstream(tmp_.file("keys")) << "sk-test-key-1234567890\n";
    std::filesystem::permissions(tmp_.file("keys"), std::filesystem::perms(0600));
    c.api_keys_file = tmp_.file("keys");
  }
};

TEST_F(MessagesWithKeys, XApiKeyOrBearerIsTheKey) {
  script("ok<|close|>response<|sep|>");
  const std::string body = json({{"model", "tiny"},
                                 {"max_tokens", 5},
                                 {"messages", {{{"role", "user"}, {"content", "x"}}}}})
                               .dump();
  httplib::Client c("127.0.0.1", port_);
  auto none = c.Post("/v1/messages", body, "application/json");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 401);
  EXPECT_EQ(json::parse(none->body)["error"]["type"], "authentication_error");
  auto wrong =
      c.Post("/v1/messages", {{"x-api-key", "sk-wrong-key-00000000000"}}, body, "application/json");
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401);
  const httplib::Headers anthropic = {{"x-api-key", "sk-test-key-1234567890"},
                                      {"anthropic-version", "2023-06-01"}};
  auto ok = c.Post("/v1/messages", anthropic, body, "application/json");
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  auto bearer = c.Post("/v1/messages", {{"Authorization", "Bearer sk-test-key-1234567890"}}, body,
                       "application/json");
  ASSERT_TRUE(bearer);
  EXPECT_EQ(bearer->status, 200) << bearer->body;
  // x-api-key opens the OpenAI routes too; their errors keep OpenAI's shape.
  auto models = c.Get("/v1/models", anthropic);
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
  auto denied = c.Get("/v1/models");
  ASSERT_TRUE(denied);
  EXPECT_EQ(json::parse(denied->body)["error"]["code"], "invalid_api_key");
}

}  // namespace
}  // namespace k3::gateway
