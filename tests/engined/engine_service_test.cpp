// engined's gRPC service through an in-process channel over the tiny model:
// a Generate stream carries the prompt's reading (`progress`) between
// `started` and the first token, Stats reports the measured prefill rate, and
// a caller that hangs up during prefill stops it.
#include "engined/engine_service.h"

#include <gtest/gtest.h>

#include <chrono>
#include <memory>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "tests/engined/serving/loop_util.h"
#include "tests/test_util.h"

namespace k3::engined {
namespace {

namespace v1 = k3serve::v1;

std::vector<int32_t> ramp(int n, int start = 5) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(start + (i * 37) % 3000);
  return v;
}

// The service over a loop of one session (16-token prefill chunks), served
// in process.
struct Served {
  std::unique_ptr<EngineLoop> loop = testing::make_loop(1);
  EngineServiceImpl service{loop.get()};
  std::unique_ptr<grpc::Server> server;
  std::unique_ptr<v1::EngineService::Stub> stub;
  Served() {
    grpc::ServerBuilder b;
    b.RegisterService(&service);
    server = b.BuildAndStart();
    stub = v1::EngineService::NewStub(server->InProcessChannel(grpc::ChannelArguments()));
  }
  ~Served() { server->Shutdown(); }
};

v1::GenerateRequest request(int prompt_tokens, uint32_t max_tokens) {
  v1::GenerateRequest r;
  r.set_request_id("svc");
  for (int32_t id : ramp(prompt_tokens)) r.add_prompt_ids(id);
  r.set_max_tokens(max_tokens);
  return r;
}

TEST(EngineService, GenerateCarriesProgressBetweenStartedAndTheFirstToken) {
  Served s;
  grpc::ClientContext ctx;
  auto reader = s.stub->Generate(&ctx, request(40, 3));
  std::vector<v1::GenerateEvent> ev;
  v1::GenerateEvent e;
  while (reader->Read(&e)) ev.push_back(e);
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_GE(ev.size(), 1u + 4u + 3u + 1u);
  ASSERT_TRUE(ev[0].has_started());
  EXPECT_EQ(ev[0].started().prefill_tokens(), 40u);
  // 0 before the first piece, then after each 16-token piece.
  const std::vector<uint32_t> dones = {0, 16, 32, 40};
  for (size_t i = 0; i < dones.size(); ++i) {
    const v1::GenerateEvent& p = ev[1 + i];
    ASSERT_TRUE(p.has_progress()) << "event " << 1 + i << ": " << p.ShortDebugString();
    EXPECT_EQ(p.progress().done(), dones[i]);
    EXPECT_EQ(p.progress().total(), 40u);
  }
  EXPECT_LT(ev[1].progress().eta_s(), 0) << "a fresh engined has measured no rate";
  EXPECT_GT(ev[2].progress().eta_s(), 0);
  EXPECT_EQ(ev[4].progress().eta_s(), 0.0);
  ASSERT_TRUE(ev[5].has_token()) << ev[5].ShortDebugString();
  for (size_t i = 5; i < ev.size(); ++i) EXPECT_FALSE(ev[i].has_progress()) << "event " << i;
  EXPECT_TRUE(ev.back().has_finished());

  grpc::ClientContext sc;
  v1::EngineStatsResponse stats;
  ASSERT_TRUE(s.stub->Stats(&sc, v1::EngineStatsRequest(), &stats).ok());
  EXPECT_GT(stats.prefill_tokens_per_second(), 0);
  EXPECT_EQ(stats.prefill_tokens_per_second(), s.loop->counters().prefill_tokens_per_second);
}

// The caller hangs up once the prompt's reading started: engined cancels the
// request, and its prefill-token counter stops short of the prompt and does
// not move again.
TEST(EngineService, ACallerHangingUpDuringPrefillStopsIt) {
  Served s;
  const int n = 3000;
  {
    grpc::ClientContext ctx;
    auto reader = s.stub->Generate(&ctx, request(n, 5));
    v1::GenerateEvent e;
    ASSERT_TRUE(reader->Read(&e));
    ASSERT_TRUE(e.has_started());
    ASSERT_TRUE(reader->Read(&e));
    ASSERT_TRUE(e.has_progress());
    ctx.TryCancel();
    while (reader->Read(&e)) {
    }
    EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  }
  // The loop hears of it within a piece of the call's poll; generous bound.
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  while (s.loop->counters().cancelled == 0 && std::chrono::steady_clock::now() < give_up)
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  const EngineCounters c = s.loop->counters();
  ASSERT_EQ(c.cancelled, 1u);
  EXPECT_LT(c.prefill_tokens, static_cast<uint64_t>(n));
  EXPECT_EQ(c.sessions_busy, 0u);
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_EQ(s.loop->counters().prefill_tokens, c.prefill_tokens);
}

}  // namespace
}  // namespace k3::engined
