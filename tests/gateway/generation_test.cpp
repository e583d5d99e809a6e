// The gateway over a scripted engined (tests/gateway/fake_engine_fixture.h):
// the OpenAI HTTP API's tool calls (ids, streamed argument fragments,
// finish_reason), reasoning/content split, usage from engined's counters, stop
// strings cancelling engined, and engined's errors. The real model's output is
// random, so these paths need a script.
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
  // Every prompt token not computed again: 7 continued from the session and
  // 3 restored (the breakdown, included).
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 10);
  EXPECT_EQ(j["usage"]["k3_restored_tokens"], 3);
  const std::string metrics = core_->metrics().render();
  EXPECT_NE(metrics.find("\nk3_cached_prompt_tokens_total 10\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("\nk3_restored_prompt_tokens_total 3\n"), std::string::npos) << metrics;
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
  EXPECT_EQ(ev.back()["usage"]["prompt_tokens_details"]["cached_tokens"], 10);
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
  // An SSE request's head and first chunk went out when it was admitted:
  // engined's error follows them as an error event, then [DONE].
  EXPECT_EQ(s->status, 200);
  EXPECT_EQ(s->get_header_value("Content-Type"), "text/event-stream");
  const auto ev = events(s->body);
  ASSERT_EQ(ev.size(), 2u) << s->body;
  EXPECT_EQ(ev[0]["choices"][0]["delta"]["role"], "assistant");
  EXPECT_NE(ev[1]["error"]["message"].get<std::string>().find("expertd d0 is down"),
            std::string::npos);
  EXPECT_EQ(ev[1]["error"]["code"], "service_unavailable") << ev[1];
}

// A request refused before admission (the queue full, n over the free
// sessions) is still a plain HTTP error when streamed.
TEST_F(GatewayOverFakeEngine, AStreamRefusedBeforeAdmissionIsAPlainHttpError) {
  auto r =
      post("/v1/chat/completions",
           {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"stream", true}, {"n", 3}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_EQ(r->get_header_value("Content-Type"), "application/json");
  EXPECT_EQ(json::parse(r->body)["error"]["param"], "n");
}

// --request-timeout-s is a cap: a non-streamed reply it cuts returns what it
// generated, finish_reason length, marked X-K3-Truncated: deadline.
TEST_F(GatewayShortDeadline, TheDeadlineCutsANonStreamedReplyKeepingWhatItGenerated) {
  std::string words;
  for (int i = 0; i < 400; ++i) words += "word ";
  script(words);
  engine_.delay_ms = 10;  // 4 s of tokens against a 1 s deadline
  const auto t0 = std::chrono::steady_clock::now();
  auto r = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                         {"enable_thinking", false}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->get_header_value("X-K3-Truncated"), "deadline");
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 3.5);
  const json j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length");
  const std::string content = j["choices"][0]["message"]["content"];
  EXPECT_EQ(content.rfind("word word", 0), 0u) << content;
  const int generated = j["usage"]["completion_tokens"];
  EXPECT_GT(generated, 0);
  EXPECT_LT(generated, 400);
  for (int i = 0; i < 200 && !engine_.cancelled; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(engine_.cancelled);
  // A reply that ends in time carries no such header.
  script("Hi.");
  engine_.delay_ms = 0;
  auto ok = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                          {"enable_thinking", false}});
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  EXPECT_FALSE(ok->has_header("X-K3-Truncated"));
}

// Reached before the first token, the cap is a 504; in a stream, an error
// event after the chunks already sent.
TEST_F(GatewayShortDeadline, TheDeadlineBeforeAnyTokenIs504OrAnErrorEvent) {
  script("Hello world.");
  engine_.pause_ms = 5000;  // engined silent past the 1 s cap
  auto r = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                         {"enable_thinking", false}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 504) << r->body;
  EXPECT_NE(
      json::parse(r->body)["error"]["message"].get<std::string>().find("request deadline passed"),
      std::string::npos)
      << r->body;
  auto s = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                         {"enable_thinking", false},
                                         {"stream", true}});
  ASSERT_TRUE(s);
  EXPECT_EQ(s->status, 200);
  const auto ev = events(s->body);
  ASSERT_GE(ev.size(), 2u) << s->body;
  EXPECT_EQ(ev.front()["choices"][0]["delta"]["role"], "assistant");
  EXPECT_EQ(ev.back()["error"]["code"], "timeout") << s->body;
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

// The model's stop tokens (shared/checkpoint/stop_tokens.h) go to engined
// with every request, chat and completion alike: <|end_of_msg|> and [EOS]
// (the tokenizer's eos_token); a reply ending at one shows no text of it.
TEST_F(GatewayOverFakeEngine, EveryRequestStopsAtTheModelsStopTokens) {
  const int32_t eos = *tok_->special_id("[EOS]");
  const int32_t end_of_msg = *tok_->special_id("<|end_of_msg|>");
  const std::vector<int32_t> stops = {std::min(eos, end_of_msg), std::max(eos, end_of_msg)};
  auto stop_ids = [&] {
    std::lock_guard<std::mutex> lk(engine_.mu);
    return std::vector<int32_t>(engine_.last.stop_ids().begin(), engine_.last.stop_ids().end());
  };
  script("Hello[EOS]");
  auto r = post("/v1/completions", {{"prompt", "Hi"}, {"max_tokens", 5}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  json j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["text"], "Hello");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(stop_ids(), stops);

  script("Hi there[EOS]");
  r = post("/v1/chat/completions",
           {{"messages", {{{"role", "user"}, {"content", "Hi"}}}}, {"enable_thinking", false}});
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  j = json::parse(r->body);
  EXPECT_EQ(j["choices"][0]["message"]["content"], "Hi there");
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
  EXPECT_EQ(stop_ids(), stops);
}

// A reply that ended at [EOS] is remembered as the rendering closes a reply,
// with <|end_of_msg|>: the next turn continues after it, never after [EOS].
TEST_F(GatewayOverFakeEngine, AFollowUpToAReplyEndingAtEosContinuesAfterEndOfMsg) {
  const std::string body =
      "plan<|close|>think<|sep|><|open|>response<|sep|>Paris<|close|>response<|sep|>"
      "<|close|>message<|sep|>";
  script(body + "[EOS]");
  json turn1 = {{"messages", {{{"role", "user"}, {"content", "Capital of France?"}}}}};
  auto r1 = post("/v1/chat/completions", turn1);
  ASSERT_TRUE(r1);
  ASSERT_EQ(r1->status, 200) << r1->body;
  const json a1 = json::parse(r1->body)["choices"][0];
  EXPECT_EQ(a1["message"]["content"], "Paris");
  EXPECT_EQ(a1["finish_reason"], "stop");
  std::vector<int32_t> ran;
  {
    std::lock_guard<std::mutex> lk(engine_.mu);
    ran.assign(engine_.last.prompt_ids().begin(), engine_.last.prompt_ids().end());
  }
  const auto closed = *tok_->encode_markup(body + "<|end_of_msg|>");
  ran.insert(ran.end(), closed.begin(), closed.end());

  json turn2 = turn1;
  turn2["messages"].push_back({{"role", "assistant"}, {"content", "Paris"}});
  turn2["messages"].push_back({{"role", "user"}, {"content", "And of Italy?"}});
  auto r2 = post("/v1/chat/completions", turn2);
  ASSERT_TRUE(r2);
  ASSERT_EQ(r2->status, 200) << r2->body;
  std::lock_guard<std::mutex> lk(engine_.mu);
  const std::vector<int32_t> prompt2(engine_.last.prompt_ids().begin(),
                                     engine_.last.prompt_ids().end());
  ASSERT_GT(prompt2.size(), ran.size());
  EXPECT_TRUE(std::equal(ran.begin(), ran.end(), prompt2.begin()))
      << "turn 2 does not continue turn 1's ids closed by <|end_of_msg|>";
  EXPECT_EQ(std::count(prompt2.begin(), prompt2.end(), *tok_->special_id("[EOS]")), 0);
}

// ---- the HTTP API's routes and wire decisions ----

// A raw client: sends `req`, optionally hangs up after `hang_up_after_s`.

}  // namespace
}  // namespace k3::gateway
