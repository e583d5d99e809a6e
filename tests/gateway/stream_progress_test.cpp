// A stream is never silent, and a stalled request ends (issue 25; the
// contract is docs/openai-api.md, "Streams"): the head and first chunk at
// once, ": queued N" while waiting for admission, engined's prompt reports
// as ": prefill DONE/TOTAL eta_s=S", ": keep-alive" in every other silence,
// gRPC's Progress events, and --progress-timeout-s, over a scripted engined
// (tests/gateway/fake_engine_fixture.h) with the cadence shortened to 50 ms.
// Assertions are on counts and order, never on tight timings.
#include "tests/gateway/fake_engine_fixture.h"

namespace k3::gateway {
namespace {

using namespace fake_engine;

// A streamed POST read as it arrives: `on_bytes` sees all that came so far
// after each piece.
struct Streamed {
  int status = 0;
  std::string body;
};
Streamed stream_post(int port, const std::string& path, const json& body,
                     const std::function<void(const std::string&)>& on_bytes = {}) {
  httplib::Client c("127.0.0.1", port);
  c.set_read_timeout(60, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.headers.emplace("Content-Type", "application/json");
  req.body = body.dump();
  Streamed out;
  req.content_receiver = [&](const char* data, size_t n, uint64_t, uint64_t) {
    out.body.append(data, n);
    if (on_bytes) on_bytes(out.body);
    return true;
  };
  auto r = c.send(req);
  EXPECT_TRUE(r) << httplib::to_string(r.error());
  if (r) out.status = r->status;
  return out;
}

// The stream's items in order: "data: ..." events and ": ..." comments, each
// one line ended by an empty line.
std::vector<std::string> items(const std::string& body) {
  std::vector<std::string> out;
  size_t pos = 0;
  while (pos < body.size()) {
    const size_t end = body.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << "an item not ended by an empty line: " << body.substr(pos);
    if (end == std::string::npos) break;
    out.push_back(body.substr(pos, end - pos));
    EXPECT_EQ(out.back().find('\n'), std::string::npos) << out.back();
    pos = end + 2;
  }
  return out;
}

bool is_content(const std::string& item) {
  return item.rfind("data: ", 0) == 0 && item.find("\"content\":\"") != std::string::npos &&
         item.find("\"content\":\"\"") == std::string::npos;
}
size_t first_content(const std::vector<std::string>& it) {
  for (size_t i = 0; i < it.size(); ++i)
    if (is_content(it[i])) return i;
  return it.size();
}
int count(const std::vector<std::string>& it, const std::string& item, size_t from = 0,
          size_t to = std::string::npos) {
  int n = 0;
  for (size_t i = from; i < std::min(to, it.size()); ++i) n += it[i] == item ? 1 : 0;
  return n;
}
// Consecutive repeats collapsed.
std::vector<std::string> distinct_runs(const std::vector<std::string>& it) {
  std::vector<std::string> out;
  for (const std::string& s : it)
    if (out.empty() || out.back() != s) out.push_back(s);
  return out;
}

v1::GenerateProgress report(uint32_t done, uint32_t total, double eta_s) {
  v1::GenerateProgress p;
  p.set_done(done);
  p.set_total(total);
  p.set_eta_s(eta_s);
  return p;
}

json chat_stream(const std::string& content = "hi") {
  return {{"messages", {{{"role", "user"}, {"content", content}}}},
          {"enable_thinking", false},
          {"stream", true}};
}

class StreamProgress : public GatewayOverFakeEngine {
 protected:
  void configure(GatewayConfig& c) override { c.progress_interval_s = 0.05; }
};

TEST_F(StreamProgress, TheHeadAndFirstChunkGoOutBeforeEnginedAnswers) {
  script("Hello.");
  engine_.pause_ms = 10000;  // silent until released
  bool first_while_silent = false;
  auto s = stream_post(port_, "/v1/chat/completions", chat_stream(), [&](const std::string& got) {
    if (got.find("\"role\":\"assistant\"") != std::string::npos && !engine_.release) {
      first_while_silent = true;
      engine_.release = true;
    }
  });
  EXPECT_EQ(s.status, 200);
  EXPECT_TRUE(first_while_silent) << "the first chunk waited for engined";
  const auto it = items(s.body);
  ASSERT_GE(it.size(), 3u) << s.body;
  // OpenAI's first chunk: the role and an empty content.
  const json first = json::parse(it[0].substr(6));
  EXPECT_EQ(first["choices"][0]["delta"], json({{"role", "assistant"}, {"content", ""}}));
  EXPECT_TRUE(first["choices"][0]["finish_reason"].is_null());
  EXPECT_EQ(it.back(), "data: [DONE]");
  std::string content;
  for (const json& e : events(s.body))
    if (!e["choices"].empty() && e["choices"][0]["delta"].contains("content"))
      content += e["choices"][0]["delta"]["content"].get<std::string>();
  EXPECT_EQ(content, "Hello.");
}

TEST_F(StreamProgress, CompletionsOpenWithAnEmptyTextPerChoice) {
  script("Hello.");
  auto s = stream_post(port_, "/v1/completions",
                       {{"prompt", "Hi"}, {"max_tokens", 5}, {"n", 2}, {"stream", true}});
  EXPECT_EQ(s.status, 200);
  const auto it = items(s.body);
  ASSERT_GE(it.size(), 3u) << s.body;
  for (int i = 0; i < 2; ++i) {
    const json c = json::parse(it[static_cast<size_t>(i)].substr(6))["choices"][0];
    EXPECT_EQ(c["index"], i);
    EXPECT_EQ(c["text"], "");
    EXPECT_TRUE(c["finish_reason"].is_null());
  }
}

TEST_F(StreamProgress, KeepAlivesFillEverySilence) {
  script("Hello world again.");
  engine_.pause_ms = 1000;  // before the first token
  engine_.delay_ms = 300;   // then between tokens
  auto s = stream_post(port_, "/v1/chat/completions", chat_stream());
  EXPECT_EQ(s.status, 200);
  const auto it = items(s.body);
  const size_t first = first_content(it);
  ASSERT_LT(first, it.size()) << s.body;
  // Every 50 ms of the second's silence, generously counted.
  EXPECT_GE(count(it, ": keep-alive", 0, first), 5) << s.body;
  size_t last = first;
  for (size_t i = first; i < it.size(); ++i)
    if (is_content(it[i])) last = i;
  EXPECT_GT(last, first);
  EXPECT_GE(count(it, ": keep-alive", first, last), 2) << "no keep-alive between slow tokens";
  // Nothing but keep-alives: engined reported no prompt reading, nothing
  // waited in the queue.
  for (const std::string& i : it)
    if (i.rfind(":", 0) == 0) EXPECT_EQ(i, ": keep-alive");
  EXPECT_EQ(it.back(), "data: [DONE]");
}

TEST_F(StreamProgress, EnginedsPromptReportsBecomePrefillComments) {
  script("Hello.");
  engine_.progress = {report(0, 300, -1), report(100, 300, 2.4), report(200, 300, 1.2),
                      report(300, 300, 0)};
  engine_.progress_delay_ms = 300;
  auto s = stream_post(port_, "/v1/chat/completions", chat_stream());
  EXPECT_EQ(s.status, 200);
  const auto it = items(s.body);
  const size_t first = first_content(it);
  std::vector<std::string> prefill;
  for (size_t i = 0; i < it.size(); ++i)
    if (it[i].rfind(": prefill ", 0) == 0) {
      EXPECT_LT(i, first) << "a prefill comment after the first token";
      prefill.push_back(it[i]);
    }
  // Each report once in order (no eta_s while engined has no rate), each
  // repeated while the prompt is read; the last one (300/300) not repeated.
  EXPECT_EQ(distinct_runs(prefill),
            (std::vector<std::string>{": prefill 0/300", ": prefill 100/300 eta_s=3",
                                      ": prefill 200/300 eta_s=2", ": prefill 300/300 eta_s=0"}))
      << s.body;
  EXPECT_GE(count(it, ": prefill 0/300"), 2) << s.body;
  EXPECT_GE(count(it, ": prefill 100/300 eta_s=3"), 2) << s.body;
  EXPECT_EQ(count(it, ": prefill 300/300 eta_s=0"), 1) << s.body;
}

TEST_F(StreamProgress, GrpcStreamsCarryProgressUntilTheFirstDelta) {
  script("Hello world.");
  engine_.progress = {report(0, 300, -1), report(150, 300, 2.4), report(300, 300, 0)};
  engine_.progress_delay_ms = 300;
  engine_.delay_ms = 200;  // slow tokens: no Progress between them
  auto stub = v1::Gateway::NewStub(
      grpc::CreateChannel("unix:" + tmp_.file("gateway.sock"), grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  v1::ChatRequest req;
  auto* m = req.add_messages();
  m->set_role("user");
  m->set_content("hi");
  req.set_enable_thinking(false);
  auto reader = stub->Chat(&ctx, req);
  v1::ChatEvent e;
  std::vector<std::string> progress;
  bool delta_seen = false, done_seen = false;
  int progress_after_delta = 0;
  while (reader->Read(&e)) {
    if (e.has_progress()) {
      const auto& p = e.progress();
      EXPECT_EQ(p.queued(), 0u);
      progress.push_back(cat(p.done(), "/", p.total(), " ", p.eta_s()));
      if (delta_seen) ++progress_after_delta;
    } else if (e.has_delta()) {
      delta_seen = true;
    } else if (e.has_done()) {
      done_seen = true;
    }
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_TRUE(done_seen);
  EXPECT_EQ(progress_after_delta, 0);
  // Repeats carry the last report (the last until the first token).
  EXPECT_EQ(distinct_runs(progress),
            (std::vector<std::string>{"0/300 -1", "150/300 2.4", "300/300 0"}));
  EXPECT_GE(progress.size(), 5u);  // repeated every 50 ms while engined reads
}

// One engine session: requests queue in the gateway.
class StreamProgressOneSession : public StreamProgress {
 protected:
  void SetUp() override {
    engine_.sessions = 1;
    StreamProgress::SetUp();
  }
};

// The same with --progress-timeout-s 0.5.
class ShortProgressTimeout : public StreamProgress {
 protected:
  void SetUp() override {
    engine_.sessions = 1;
    progress_timeout_s_ = 0.5;
    StreamProgress::SetUp();
  }
};

TEST_F(StreamProgressOneSession, AQueuedStreamHearsItsPlaceInLine) {
  script("Hello.");
  engine_.pause_ms = 20000;  // the first request holds the session until released
  // After the release each request keeps the session half a second (its
  // tokens 20 ms apart, then the linger): c, second in line, is first for
  // that long and hears it (without, b could end before c's next report).
  engine_.delay_ms = 20;
  std::thread a([&] {
    auto r = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "a"}}}},
                                           {"enable_thinking", false}});
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  });
  for (int i = 0; i < 1000 && engine_.generating == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(engine_.generating, 1);
  Streamed b, c;
  std::atomic<bool> b_repeated{false};
  std::thread tb([&] {
    b = stream_post(port_, "/v1/chat/completions", chat_stream("b"), [&](const std::string& got) {
      const size_t first = got.find(": queued 1\n\n");
      if (first != std::string::npos && got.find(": queued 1\n\n", first + 1) != std::string::npos)
        b_repeated = true;
    });
  });
  for (int i = 0; i < 1000 && core_->admission().waiting() < 1; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  std::atomic<bool> c_second{false};
  std::thread tc([&] {
    c = stream_post(port_, "/v1/chat/completions", chat_stream("c"), [&](const std::string& got) {
      if (got.find(": queued 2\n\n") != std::string::npos) c_second = true;
    });
  });
  for (int i = 0; i < 2000 && !(c_second && b_repeated); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(c_second);
  EXPECT_TRUE(b_repeated) << "the place is not repeated while waiting";
  engine_.release = true;
  a.join();
  tb.join();
  tc.join();
  EXPECT_EQ(b.status, 200);
  EXPECT_EQ(c.status, 200);
  const auto ib = items(b.body), ic = items(c.body);
  // The first chunk, then the place, repeated while waiting.
  ASSERT_GE(ib.size(), 2u);
  EXPECT_NE(ib[0].find("\"role\":\"assistant\""), std::string::npos);
  EXPECT_EQ(ib[1], ": queued 1");
  std::vector<std::string> places;
  for (size_t i = 0; i < ic.size(); ++i)
    if (ic[i].rfind(": queued ", 0) == 0) {
      EXPECT_LT(i, first_content(ic));
      places.push_back(ic[i]);
    }
  EXPECT_EQ(distinct_runs(places), (std::vector<std::string>{": queued 2", ": queued 1"}))
      << c.body;
}

// The time waiting for admission is not the running time
// --progress-timeout-s (0.5 s here) measures.
TEST_F(ShortProgressTimeout, TimeQueuedDoesNotCountTowardTheProgressTimeout) {
  std::string words;
  for (int i = 0; i < 15; ++i) words += "word ";
  script(words);
  engine_.delay_ms = 100;  // 1.5 s of steady tokens
  engine_.linger = false;  // and no silence after them
  const json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                     {"enable_thinking", false}};
  std::thread a([&] {
    auto r = post("/v1/chat/completions", body);
    EXPECT_TRUE(r && r->status == 200) << (r ? r->body : "no answer");
  });
  for (int i = 0; i < 1000 && engine_.generating == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  auto r = post("/v1/chat/completions", body);  // waits about 1.5 s for the session
  a.join();
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(ShortProgressTimeout, NoProgressFailsARunningRequest) {
  script("Hello world again and again.");
  engine_.pause_ms = 10000;  // engined silent
  auto r = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                         {"enable_thinking", false}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 504) << r->body;
  const json err = json::parse(r->body)["error"];
  EXPECT_EQ(err["code"], "timeout");
  EXPECT_EQ(
      err["message"].get<std::string>().rfind("no progress for 0.5 s (--progress-timeout-s)", 0),
      0u)
      << err;
  for (int i = 0; i < 400 && !engine_.cancelled; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  EXPECT_TRUE(engine_.cancelled);
  EXPECT_EQ(core_->admission().running(), 0);

  // In a stream: what was sent stays, then the error event, [DONE], the end.
  engine_.cancelled = false;
  engine_.pause_after = 2;  // two tokens, then silence
  auto s = stream_post(port_, "/v1/chat/completions", chat_stream());
  EXPECT_EQ(s.status, 200);
  const auto ev = events(s.body);
  ASSERT_GE(ev.size(), 3u) << s.body;
  std::string content;
  for (size_t i = 0; i + 1 < ev.size(); ++i) {
    ASSERT_FALSE(ev[i].contains("error")) << s.body;
    content += ev[i]["choices"][0]["delta"].value("content", "");
  }
  EXPECT_FALSE(content.empty()) << s.body;
  EXPECT_EQ(ev.back()["error"]["code"], "timeout");
  EXPECT_EQ(ev.back()["error"]["message"].get<std::string>().rfind("no progress for 0.5 s", 0), 0u);
  EXPECT_EQ(items(s.body).back(), "data: [DONE]");
}

// Without a request deadline, a gRPC client that stops reading is still
// cancelled: a Write that waits --progress-timeout-s (1 s here) ends the call.
class GrpcStallNoDeadline : public GatewayOverFakeEngine {
 protected:
  void SetUp() override {
    progress_timeout_s_ = 1;
    GatewayOverFakeEngine::SetUp();
  }
};

TEST_F(GrpcStallNoDeadline, AClientThatStopsReadingCannotHoldASlot) {
  std::string words;
  for (int i = 0; i < 200000; ++i) words += "w ";
  script(words);
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_HTTP2_BDP_PROBE, 0);
  args.SetInt(GRPC_ARG_HTTP2_STREAM_LOOKAHEAD_BYTES, 16384);
  auto stub = v1::Gateway::NewStub(grpc::CreateCustomChannel(
      "unix:" + tmp_.file("gateway.sock"), grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext ctx;  // no deadline of its own, and the gateway has none
  v1::ChatRequest req;
  auto* m = req.add_messages();
  m->set_role("user");
  m->set_content("hi");
  req.set_enable_thinking(false);
  auto reader = stub->Chat(&ctx, req);  // never read
  for (int i = 0; i < 1000 && engine_.generating == 0; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(engine_.generating, 1);
  bool ended = false;
  for (int i = 0; i < 1500 && !ended; ++i) {
    ended = core_->admission().running() == 0 && engine_.generating == 0;
    if (!ended) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(ended) << core_->metrics().render();
  EXPECT_TRUE(engine_.cancelled);
  ctx.TryCancel();
}

}  // namespace
}  // namespace k3::gateway
