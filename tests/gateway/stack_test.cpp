// The three daemons as real processes on the tiny model (expertd over shared
// memory, engined serve, gateway), driven through the public APIs with a real
// HTTP client and gRPC stubs: concurrency and the queue bound, cancellation
// when the client goes away, multi-turn reuse and checkpoint restores (on
// engined's counters), re-routing to an expertd replica, API keys, errors.
#include <arpa/inet.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include "k3serve/v1/engine.grpc.pb.h"
#include "k3serve/v1/expert.grpc.pb.h"
#include "k3serve/v1/gateway.grpc.pb.h"
#include "tests/gateway/stack_fixture.h"
#include "tests/hugetlbfs_mount.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

using json = nlohmann::json;
using testing::chat_body;
using testing::Process;
using testing::Stack;
using testing::StackOptions;
using testing::TempDir;
namespace v1 = k3serve::v1;

std::vector<int> ramp(int n, int start = 5) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(start + (i * 37) % 3000);
  return v;
}

TEST(Stack, ThirtyTwoClientsAreAnsweredOrRefusedWith429) {
  StackOptions o;
  o.sessions = 2;
  o.max_queue = 6;
  Stack s(o);
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  std::map<int, int> codes;
  std::mutex mu;
  std::vector<std::thread> clients;
  std::atomic<int> go{0};
  for (int i = 0; i < 32; ++i)
    clients.emplace_back([&, i] {
      while (go.load() == 0) std::this_thread::yield();
      auto r = s.post("/v1/chat/completions", chat_body("client " + std::to_string(i), 24));
      std::lock_guard<std::mutex> lk(mu);
      if (!r) {
        ++codes[-1];
        ADD_FAILURE() << "client " << i << ": " << httplib::to_string(r.error());
        return;
      }
      ++codes[r->status];
      const json j = json::parse(r->body);
      if (r->status == 200) {
        EXPECT_EQ(j["choices"][0]["message"]["role"], "assistant");
        EXPECT_GT(j["usage"]["completion_tokens"].get<int>(), 0);
      } else {
        EXPECT_EQ(r->status, 429) << r->body;
        EXPECT_EQ(j["error"]["code"], "rate_limit_exceeded");
        EXPECT_EQ(r->get_header_value("Retry-After"), "1");
      }
    });
  go = 1;
  for (auto& t : clients) t.join();
  EXPECT_EQ(codes[200] + codes[429], 32) << "other outcomes: " << json(codes).dump() << "\n"
                                         << s.logs();
  EXPECT_GE(codes[200], 2 + 6);  // the running ones and the queue at least
  // Still serving, every session free, and /metrics counted both outcomes.
  auto again = s.post("/v1/chat/completions", chat_body("after", 4));
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 200);
  EXPECT_EQ(s.engine_stats().sessions_busy(), 0u);
  auto m = s.client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("k3_requests_total{api=\"chat\",code=\"200\"} " +
                         std::to_string(codes[200] + 1)),
            std::string::npos)
      << m->body;
  if (codes[429] > 0)
    EXPECT_NE(
        m->body.find("k3_requests_total{api=\"chat\",code=\"429\"} " + std::to_string(codes[429])),
        std::string::npos);
  for (const char* name : {"k3_queue_depth", "k3_time_to_first_token_seconds_count",
                           "k3_decode_seconds_per_token_count", "k3_expert_hit_ratio",
                           "k3_expert_read_gbps", "k3_generated_tokens_total"})
    EXPECT_NE(m->body.find(name), std::string::npos) << name;
}

// Sends a request on a raw socket, waits for the response headers (a
// streaming one) or not, then closes the connection: the client going away
// mid-request.
void post_and_hang_up(const std::string& http, const json& body, double after_seconds,
                      const std::string& path = "/v1/completions", bool wait_headers = true) {
  const size_t colon = http.rfind(':');
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(std::stoi(http.substr(colon + 1))));
  ::inet_pton(AF_INET, http.substr(0, colon).c_str(), &sa.sin_addr);
  ASSERT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  const std::string payload = body.dump();
  const std::string req =
      "POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: "
      "application/json\r\nContent-Length: " +
      std::to_string(payload.size()) + "\r\n\r\n" + payload;
  ASSERT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  char buf[512];
  if (wait_headers) ASSERT_GT(::read(fd, buf, sizeof buf), 0);  // the headers
  std::this_thread::sleep_for(std::chrono::duration<double>(after_seconds));
  ::close(fd);
}

TEST(Stack, ClientHangingUpMidPrefillCancelsItInEngined) {
  Stack s(StackOptions{});
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  // A long prompt: seconds of prefill on the tiny model. An SSE response's
  // head goes out once the request is admitted, before prefill.
  const json body = {{"prompt", ramp(6000)}, {"max_tokens", 4}, {"stream", true}};
  post_and_hang_up(s.http(), body, 0.5, "/v1/completions", /*wait_headers=*/true);
  ASSERT_TRUE(s.wait_engine([](const v1::EngineStatsResponse& st) {
    return st.requests_cancelled() == 1 && st.sessions_busy() == 0;
  })) << s.logs();
  const auto st = s.engine_stats();
  EXPECT_LT(st.prefill_tokens(), 6000u);  // stopped part-way
  EXPECT_EQ(st.generated_tokens(), 0u);
  // The freed session serves the next request.
  auto r = s.post("/v1/chat/completions", chat_body("next", 3));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST(Stack, NonStreamingClientHangingUpIsNoticedToo) {
  StackOptions o;
  o.sessions = 1;
  Stack s(o);
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  // Holds the one session for a while.
  std::thread holder([&] {
    auto r = s.post("/v1/completions", {{"prompt", ramp(1500)}, {"max_tokens", 2}});
    EXPECT_TRUE(r && r->status == 200);
  });
  ASSERT_TRUE(s.wait_engine([](const v1::EngineStatsResponse& st) { return st.requests() == 1; }));
  // A second client waits in the queue, then hangs up: it never reaches engined.
  post_and_hang_up(s.http(), {{"prompt", ramp(100)}, {"max_tokens", 2}}, 0.5, "/v1/completions",
                   /*wait_headers=*/false);
  holder.join();
  EXPECT_EQ(s.engine_stats().requests(), 1u) << s.logs();
  // A non-streaming request whose client hangs up mid-prefill is cancelled.
  post_and_hang_up(s.http(), {{"prompt", ramp(6000)}, {"max_tokens", 4}}, 0.5, "/v1/completions",
                   /*wait_headers=*/false);
  ASSERT_TRUE(s.wait_engine([](const v1::EngineStatsResponse& st) {
    return st.requests_cancelled() == 1 && st.sessions_busy() == 0;
  })) << s.logs();
  EXPECT_LT(s.engine_stats().prefill_tokens(), 1500u + 6000u);
  auto m = s.client().Get("/metrics");
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("k3_requests_total{api=\"completion\",code=\"499\"} 2"), std::string::npos)
      << m->body;
}

TEST(Stack, GrpcCancelMidDecodeFreesTheSession) {
  Stack s(StackOptions{});
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  auto stub = s.gateway_stub();
  grpc::ClientContext ctx;
  v1::ChatRequest req;
  auto* m = req.add_messages();
  m->set_role("user");
  m->set_content("talk for a long time");
  req.set_max_tokens(100000);
  auto reader = stub->Chat(&ctx, req);
  v1::ChatEvent e;
  int deltas = 0;
  while (deltas < 3 && reader->Read(&e))
    if (e.has_delta()) ++deltas;
  ASSERT_EQ(deltas, 3);
  ctx.TryCancel();
  while (reader->Read(&e)) {
  }
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  ASSERT_TRUE(s.wait_engine([](const v1::EngineStatsResponse& st) {
    return st.requests_cancelled() == 1 && st.sessions_busy() == 0;
  })) << s.logs();
  EXPECT_LT(s.engine_stats().generated_tokens(), 10000u);
}

TEST(Stack, NextTurnPrefillsOnlyTheNewTokens) {
  Stack s(StackOptions{});
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  // Raw ids: with max_tokens 1 the session holds exactly the prompt (the one
  // sampled token is never run), so prompt + more continues it.
  const auto p = ramp(50);
  auto r1 = s.post("/v1/completions", {{"prompt", p}, {"max_tokens", 1}, {"temperature", 0}});
  ASSERT_TRUE(r1);
  ASSERT_EQ(r1->status, 200) << r1->body;
  const uint64_t before = s.engine_stats().prefill_tokens();
  auto p2 = p;
  for (int x : ramp(7, 200)) p2.push_back(x);
  auto r2 = s.post("/v1/completions", {{"prompt", p2}, {"max_tokens", 3}, {"temperature", 0}});
  ASSERT_TRUE(r2);
  ASSERT_EQ(r2->status, 200) << r2->body;
  const json j = json::parse(r2->body);
  EXPECT_EQ(j["usage"]["prompt_tokens_details"]["cached_tokens"], 50);
  EXPECT_EQ(s.engine_stats().prefill_tokens() - before, 7u);

  // A chat's next turn: the state saved at the end of turn 1's prompt is
  // restored; only the reply and the new message are prefilled.
  json chat = chat_body("What is the capital of France?", 6);
  chat["messages"].insert(chat["messages"].begin(),
                          json{{"role", "system"}, {"content", "You answer briefly."}});
  auto c1 = s.post("/v1/chat/completions", chat);
  ASSERT_TRUE(c1);
  ASSERT_EQ(c1->status, 200) << c1->body;
  const json a1 = json::parse(c1->body);
  const int prompt1 = a1["usage"]["prompt_tokens"];
  json turn2 = chat;
  turn2["messages"].push_back(a1["choices"][0]["message"]);
  turn2["messages"].push_back({{"role", "user"}, {"content", "And of Italy?"}});
  const uint64_t before2 = s.engine_stats().prefill_tokens();
  auto c2 = s.post("/v1/chat/completions", turn2);
  ASSERT_TRUE(c2);
  ASSERT_EQ(c2->status, 200) << c2->body;
  const json a2 = json::parse(c2->body);
  const int prompt2 = a2["usage"]["prompt_tokens"];
  // cached_tokens counts the restored ones too (k3_restored_tokens: of them).
  const int reused = a2["usage"]["prompt_tokens_details"]["cached_tokens"].get<int>();
  EXPECT_LE(a2["usage"]["k3_restored_tokens"].get<int>(), reused);
  EXPECT_GE(reused, prompt1);
  EXPECT_EQ(s.engine_stats().prefill_tokens() - before2, static_cast<uint64_t>(prompt2 - reused));

  // Editing turn 1's question diverges before every saved state but the one
  // at the start of that user message (after the system message, a turn
  // boundary): restored from there.
  const uint64_t restores = s.engine_stats().checkpoint_restores();
  json edited = turn2;
  edited["messages"][1]["content"] = "What is the capital of Spain?";
  auto c3 = s.post("/v1/chat/completions", edited);
  ASSERT_TRUE(c3);
  ASSERT_EQ(c3->status, 200) << c3->body;
  const json a3 = json::parse(c3->body);
  EXPECT_GT(a3["usage"]["k3_restored_tokens"].get<int>(), 0);
  EXPECT_LT(a3["usage"]["k3_restored_tokens"].get<int>(), prompt1);
  EXPECT_EQ(a3["usage"]["prompt_tokens_details"]["cached_tokens"],
            a3["usage"]["k3_restored_tokens"]);
  EXPECT_EQ(s.engine_stats().checkpoint_restores(), restores + 1);
}

// Prefill snapshots (engined --snapshot-tokens) with a checkpoint directory:
// a prompt edited at its end resumes from the deepest snapshot, and the
// gateway's /metrics shows engined's snapshot counters, the disk tier's
// bytes and the dropped writes.
TEST(Stack, SnapshotsResumeAnEditedPromptAndShowOnMetrics) {
  TempDir dir;
  StackOptions o;
  o.engined_flags = {"--checkpoint-dir", dir.file("ckpt"), "--snapshot-tokens", "16"};
  Stack s(o);
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  const auto p = ramp(100);  // snapshots at 16, 32, ..., 96
  auto r1 = s.post("/v1/completions", {{"prompt", p}, {"max_tokens", 1}, {"temperature", 0}});
  ASSERT_TRUE(r1);
  ASSERT_EQ(r1->status, 200) << r1->body;
  auto edited = p;
  edited.resize(98);
  edited.push_back(7);
  // Another prompt between (shorter than one interval: no snapshot).
  auto other = s.post("/v1/completions", {{"prompt", ramp(15, 900)}, {"max_tokens", 1}});
  ASSERT_TRUE(other && other->status == 200);
  auto r2 = s.post("/v1/completions", {{"prompt", edited}, {"max_tokens", 1}, {"temperature", 0}});
  ASSERT_TRUE(r2);
  ASSERT_EQ(r2->status, 200) << r2->body;
  EXPECT_EQ(json::parse(r2->body)["usage"]["k3_restored_tokens"], 96) << r2->body;
  ASSERT_TRUE(s.wait_engine([](const v1::EngineStatsResponse& st) {
    return st.snapshots_saved() == 6 && st.checkpoint_disk_bytes() > 0;
  })) << s.logs();
  // /metrics shows engined's counters as of the gateway's last poll of them.
  auto m = s.client().Get("/metrics");
  for (int i = 0; i < 300 && m && m->body.find("k3_snapshots_saved_total 6") == std::string::npos;
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    m = s.client().Get("/metrics");
  }
  ASSERT_TRUE(m);
  EXPECT_NE(m->body.find("k3_snapshots_saved_total 6"), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("\nk3_snapshot_writes_dropped_total "), std::string::npos) << m->body;
  EXPECT_NE(m->body.find("\nk3_checkpoint_disk_bytes "), std::string::npos) << m->body;
}

TEST(Stack, ReroutesToAReplicaWhenAnExpertdDies) {
  StackOptions o;
  o.expertd = 2;
  Stack s(o);
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  auto r = s.post("/v1/chat/completions", chat_body("warm up", 4));
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  // Both attached, the first preferred (an instance still starting when the
  // gateway first polled joins the placement at a later poll).
  auto d = s.engine_describe();
  for (int i = 0; i < 300 && d.expertd_segments_size() != 2; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    d = s.engine_describe();
  }
  ASSERT_EQ(d.expertd_segments_size(), 2);
  EXPECT_EQ(d.expertd_segments(0), s.segment(0));
  const uint64_t replica_before = s.expertd_stats(1).requests();

  s.expertd(0).stop(SIGKILL);
  // The gateway notices, tells engined to use the replica; requests succeed.
  bool ok = false;
  for (int i = 0; i < 100 && !ok; ++i) {
    auto x = s.post("/v1/chat/completions", chat_body("after the failure " + std::to_string(i), 4));
    ok = x && x->status == 200;
    if (!ok) std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  ASSERT_TRUE(ok) << s.logs();
  // engined's placement already routes around the dead segment; the
  // gateway's next poll drops it from the placement.
  d = s.engine_describe();
  for (int i = 0; i < 300 && d.expertd_segments_size() != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    d = s.engine_describe();
  }
  ASSERT_EQ(d.expertd_segments_size(), 1);
  EXPECT_EQ(d.expertd_segments(0), s.segment(1));
  EXPECT_GT(s.expertd_stats(1).requests(), replica_before);
  auto h = s.client().Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);  // one replica is enough
  const json hj = json::parse(h->body);
  EXPECT_EQ(hj["expertd"][0]["healthy"], false);
  EXPECT_EQ(hj["expertd"][1]["healthy"], true);
  // Serving, but not as placed: degraded, naming what is down; the replica
  // still serves every layer.
  EXPECT_EQ(hj["status"], "degraded") << h->body;
  ASSERT_EQ(hj["degraded"]["down"].size(), 1u) << h->body;
  EXPECT_EQ(hj["degraded"]["down"][0].get<std::string>().rfind("expertd ", 0), 0u) << h->body;
  EXPECT_EQ(hj["degraded"]["layers_unserved"], json::array()) << h->body;
}

TEST(Stack, ApiKeysGuardHttpAndGrpc) {
  StackOptions o;
  o.api_key = "k3-test-key-0123456789";
  Stack s(o);
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  auto ok = s.post("/v1/chat/completions", chat_body("hi", 2));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200);
  httplib::Client anon = s.client();
  anon.set_bearer_token_auth("k3-test-key-0123456788");
  auto bad = anon.Post("/v1/chat/completions", chat_body("hi", 2).dump(), "application/json");
  ASSERT_TRUE(bad);
  EXPECT_EQ(bad->status, 401);
  EXPECT_EQ(json::parse(bad->body)["error"]["code"], "invalid_api_key");
  auto stub = s.gateway_stub();
  v1::ListModelsResponse models;
  {
    grpc::ClientContext ctx;
    EXPECT_EQ(stub->ListModels(&ctx, v1::ListModelsRequest(), &models).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    // The key is checked before the message is read: a keyless request over
    // gRPC's 4 MB receive cap is refused UNAUTHENTICATED, not read and refused
    // RESOURCE_EXHAUSTED.
    grpc::ClientContext ctx;
    v1::TokenizeRequest big;
    big.set_text(std::string(6u << 20, 'x'));
    v1::TokenizeResponse out;
    EXPECT_EQ(stub->Tokenize(&ctx, big, &out).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext ctx;
    ctx.AddMetadata("authorization", "Bearer k3-test-key-0123456789");
    EXPECT_TRUE(stub->ListModels(&ctx, v1::ListModelsRequest(), &models).ok());
    EXPECT_EQ(models.models_size(), 1);
  }
}

TEST(Stack, BadRequestsGetOpenAiErrors) {
  StackOptions o;
  // Above the smallest chat prompt (it carries the ~67-token thinking-effort
  // message).
  o.max_prompt_tokens = 200;
  Stack s(o);
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  auto c = s.client();
  auto r = c.Post("/v1/chat/completions", "{not json", "application/json");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_EQ(json::parse(r->body)["error"]["type"], "invalid_request_error");
  json unknown = chat_body("hi", 2);
  unknown["model"] = "gpt-4";
  r = s.post("/v1/chat/completions", unknown);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_NE(json::parse(r->body)["error"]["message"].get<std::string>().find("gpt-4"),
            std::string::npos);
  r = s.post("/v1/completions", {{"prompt", ramp(201)}, {"max_tokens", 2}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413);
  json hot = chat_body("hi", 2);
  hot["temperature"] = "warm";
  r = s.post("/v1/chat/completions", hot);
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("temperature"), std::string::npos);
  r = s.post("/v1/completions", {{"prompt", {1, 999999}}, {"max_tokens", 2}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("999999"), std::string::npos);
  // And the service is still up.
  r = s.post("/v1/chat/completions", chat_body("still here?", 2));
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
}

// expertd --segment-dir on a hugetlbfs mount: the segment is a file of huge
// pages there (reserved at start, mode 0600), its DIR/NAME path goes through
// the topology file (checked against expertd's Describe), the placement the
// gateway sends and engined's --expertd, and requests are answered from it.
// nr_hugepages is raised for the test and restored.
TEST(Stack, ASegmentDirOnHugetlbfsIsCarriedThroughTopologyAndPlacement) {
  TempDir mnt_parent;
  // 0.05 GB of slots plus the header: 25 pages of 2 MiB; room for 40.
  testing::HugetlbfsMount huge(mnt_parent.file("huge"), 40);
  if (!huge.ok()) GTEST_SKIP() << "hugetlbfs: " << huge.skip_reason;
  const long free_before = testing::HugetlbfsMount::meminfo("HugePages_Free:");
  {
    StackOptions o;
    o.segment_dir = huge.dir();
    Stack s(o);
    ASSERT_TRUE(s.wait_ready()) << s.logs();
    auto r = s.post("/v1/chat/completions", chat_body("from huge pages", 4));
    ASSERT_TRUE(r);
    ASSERT_EQ(r->status, 200) << r->body << s.logs();
    const std::string path =
        huge.dir() + "/" + std::filesystem::path(s.segment(0)).filename().string();
    EXPECT_EQ(s.segment(0), path);
    struct stat st {};
    ASSERT_EQ(::stat(path.c_str(), &st), 0) << path;
    EXPECT_EQ(st.st_mode & 0777, 0600u);
    EXPECT_EQ(st.st_size % (2 << 20), 0) << "a hugetlbfs file is whole huge pages";
    // Every page reserved at start, out of the huge page pool.
    EXPECT_LE(testing::HugetlbfsMount::meminfo("HugePages_Free:"),
              free_before - st.st_size / (2 << 20));
    // The placement engined uses is the path, as the topology names it.
    auto d = s.engine_describe();
    ASSERT_EQ(d.expertd_segments_size(), 1);
    EXPECT_EQ(d.expertd_segments(0), path);
    EXPECT_GT(s.expertd_stats(0).requests(), 0u);
  }
  // Stopped: the file is gone and its pages are back in the pool (once the
  // kernel has torn down expertd's io_uring, which pins them, after its exit).
  EXPECT_TRUE(std::filesystem::is_empty(huge.dir()));
  EXPECT_TRUE(huge.wait_until_all_free(std::chrono::seconds(10)));
  EXPECT_EQ(testing::HugetlbfsMount::meminfo("HugePages_Free:"), free_before);
}

}  // namespace
}  // namespace k3
