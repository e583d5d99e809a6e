// The prefill chunk policy in engined's serving loop on the tiny model
// (chunk_policy.h, chunk_pass.h): a long prompt read in big chunks gives the
// bits of fixed chunks; a decoding session steps between the parts of the
// pass; progress and a cancel go part by part; big chunks end at snapshot
// positions.
#include "engined/serving/chunk_policy.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "engined/serving/engine_loop.h"
#include "tests/engined/serving/loop_util.h"
#include "tests/test_util.h"

namespace k3::engined {
namespace {

using testing::make_loop;

std::vector<int32_t> ramp(int n, int start = 5) {
  std::vector<int32_t> v;
  for (int i = 0; i < n; ++i) v.push_back(start + (i * 37) % 3000);
  return v;
}

ServeRequest greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
  ServeRequest r;
  r.request_id = "policy";
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.logprobs = true;
  r.top_logprobs = 5;
  return r;
}

// Every event of a request until it finished or failed.
std::vector<ServeEvent> read_all(RequestHandle& h) {
  std::vector<ServeEvent> out;
  ServeEvent e;
  while (h.next(&e, 60000)) {
    out.push_back(e);
    if (e.kind == ServeEvent::Kind::kFinished || e.kind == ServeEvent::Kind::kFailed) return out;
  }
  ADD_FAILURE() << "no event within 60 s";
  return out;
}

// Tokens and their log-probabilities, bits compared.
struct Answer {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  bool operator==(const Answer& o) const {
    return tokens == o.tokens && logprobs.size() == o.logprobs.size() &&
           std::memcmp(logprobs.data(), o.logprobs.data(), logprobs.size() * sizeof(float)) == 0;
  }
};
Answer answer_of(const std::vector<ServeEvent>& ev) {
  Answer a;
  for (const ServeEvent& e : ev) {
    if (e.kind != ServeEvent::Kind::kToken) continue;
    a.tokens.push_back(e.token);
    if (e.logprobs) {
      a.logprobs.push_back(e.logprobs->chosen);
      for (const auto& [id, lp] : e.logprobs->top) a.logprobs.push_back(lp);
    }
  }
  return a;
}

Answer alone(std::unique_ptr<EngineLoop> loop, const std::vector<int32_t>& prompt, int64_t max) {
  auto h = loop->submit(greedy(prompt, max));
  EXPECT_TRUE(h.ok()) << h.status();
  if (!h.ok()) return {};
  const auto ev = read_all(**h);
  EXPECT_EQ(ev.back().kind, ServeEvent::Kind::kFinished) << ev.back().status;
  return answer_of(ev);
}

// The policy on, its parts of `part_seconds` (0: the default), 16-token
// pieces for the short prompts; RAM checkpoints and snapshots when given.
std::unique_ptr<EngineLoop> policy_loop(int sessions, double part_seconds,
                                        uint64_t checkpoint_bytes = 0, int64_t snapshots = 0) {
  EngineOptions o;
  o.chunk = 16;
  auto model = Model::load(testing::tiny_model_dir(), {}, o);
  EXPECT_TRUE(model.ok()) << model.status();
  if (!model.ok()) return nullptr;
  EngineLoopOptions lo;
  lo.sessions = sessions;
  lo.checkpoints.budget_bytes = checkpoint_bytes;
  lo.snapshot_tokens = snapshots;
  lo.chunk_policy = true;
  lo.pass_part_seconds = part_seconds;
  auto loop = EngineLoop::create(std::move(*model), lo);
  EXPECT_TRUE(loop.ok()) << loop.status();
  return loop.ok() ? std::move(*loop) : nullptr;
}

TEST(ChunkPolicy, SizesAndEnds) {
  checkpoint::ModelConfig c;
  c.hidden_size = 7168;
  c.num_hidden_layers = 93;
  c.attn_res_block_size = 8;
  c.num_experts_per_token = 16;
  c.routed_expert_hidden_size = 3072;
  // The real model's shape: ~0.7 MB a token; 24 GiB of RAM give 2 GiB of
  // buffers (an eighth, capped), ~2900 tokens: the cap. 4 GiB give 512 MiB.
  const uint64_t per_token = ChunkPolicy::bytes_per_token(c);
  EXPECT_GT(per_token, 600u << 10);
  EXPECT_LT(per_token, 800u << 10);
  EXPECT_EQ(ChunkPolicy::max_tokens(c, 24ull << 30, 0), ChunkPolicy::kMaxTokens);
  EXPECT_EQ(ChunkPolicy::max_tokens(c, 24ull << 30, 768), 1536);  // a multiple of the snapshots
  EXPECT_EQ(ChunkPolicy::max_tokens(c, 4ull << 30, 0),
            static_cast<int64_t>((512u << 20) / per_token));
  EXPECT_EQ(ChunkPolicy::max_tokens(c, 1ull << 20, 0), ChunkPolicy::kMinTokens);
  // Ends: the cap, the prompt's end, a turn boundary, the last snapshot
  // multiple short of the prompt's end.
  EXPECT_EQ(ChunkPolicy::end(0, 5000, 2048, {}, 0), 2048);
  // The last snapshot position before the prompt's end, then the rest.
  EXPECT_EQ(ChunkPolicy::end(4096, 5000, 2048, {}, 256), 4864);
  EXPECT_EQ(ChunkPolicy::end(4864, 5000, 2048, {}, 256), 5000);
  EXPECT_EQ(ChunkPolicy::end(0, 593, 2048, {}, 256), 512);
  EXPECT_EQ(ChunkPolicy::end(0, 2048, 2048, {}, 256), 2048);
  EXPECT_EQ(ChunkPolicy::end(0, 5000, 2048, {100, 3000}, 256), 100);
  // Short of a turn boundary, at the last snapshot position before it.
  EXPECT_EQ(ChunkPolicy::end(100, 5000, 2048, {100, 600}, 256), 512);
  EXPECT_EQ(ChunkPolicy::end(512, 5000, 2048, {100, 600}, 256), 600);
  EXPECT_EQ(ChunkPolicy::end(100, 5000, 2048, {100, 3000}, 256), 2048);
  EXPECT_EQ(ChunkPolicy::end(100, 5000, 2000, {}, 256), 2048);
  EXPECT_EQ(ChunkPolicy::end(10, 5000, 200, {}, 256), 210);  // no multiple inside
}

TEST(ChunkPolicy, ALongPromptGivesTheBitsOfFixedChunks) {
  const auto prompt = ramp(300);
  const Answer fixed = alone(make_loop(1), prompt, 6);
  auto loop = policy_loop(1, 0.001);
  ASSERT_TRUE(loop);
  auto h = loop->submit(greedy(prompt, 6));
  ASSERT_TRUE(h.ok()) << h.status();
  const auto ev = read_all(**h);
  ASSERT_EQ(ev.back().kind, ServeEvent::Kind::kFinished) << ev.back().status;
  EXPECT_EQ(answer_of(ev), fixed);
  EXPECT_EQ(loop->counters().prefill_tokens, 300u);
}

// A session decoding beside a long prompt steps between the pass's parts:
// its tokens arrive while the prompt is read, progress moves part by part,
// and both answers are the ones each gets alone.
TEST(ChunkPolicy, ADecoderStepsBetweenThePartsOfALongPrompt) {
  const auto dprompt = ramp(7, 11);
  const auto prompt = ramp(400, 900);
  const Answer d_alone = alone(make_loop(1), dprompt, 40);
  const Answer p_alone = alone(make_loop(1), prompt, 3);

  auto loop = policy_loop(2, 0.005);
  ASSERT_TRUE(loop);
  auto d = loop->submit(greedy(dprompt, 40));
  ASSERT_TRUE(d.ok()) << d.status();
  std::vector<ServeEvent> dev;
  ServeEvent e;
  while (dev.size() < 3 && (*d)->next(&e, 60000)) dev.push_back(e);  // started, a token...
  auto p = loop->submit(greedy(prompt, 3));
  ASSERT_TRUE(p.ok()) << p.status();
  // Read both: the decoder's tokens counted while the prompt is read.
  std::vector<ServeEvent> pev;
  int during = 0;
  bool p_reading = true, p_over = false, d_over = false;
  std::vector<int64_t> dones;
  while (!p_over || !d_over) {
    while (!d_over && (*d)->next(&e, 1)) {
      dev.push_back(e);
      if (e.kind == ServeEvent::Kind::kToken && p_reading) ++during;
      d_over = e.kind == ServeEvent::Kind::kFinished || e.kind == ServeEvent::Kind::kFailed;
    }
    while (!p_over && (*p)->next(&e, 1)) {
      pev.push_back(e);
      if (e.kind == ServeEvent::Kind::kProgress) dones.push_back(e.done);
      if (e.kind == ServeEvent::Kind::kProgress && e.done == e.total) p_reading = false;
      p_over = e.kind == ServeEvent::Kind::kFinished || e.kind == ServeEvent::Kind::kFailed;
    }
  }
  ASSERT_EQ(pev.back().kind, ServeEvent::Kind::kFinished) << pev.back().status;
  ASSERT_EQ(dev.back().kind, ServeEvent::Kind::kFinished) << dev.back().status;
  EXPECT_EQ(answer_of(pev), p_alone);
  EXPECT_EQ(answer_of(dev), d_alone);
  // Parts of 5 ms: the decoder went on.
  EXPECT_GE(during, 2) << "the decoder waited for the whole prompt";
  // Progress: 0 first, then part by part up to 400, never back.
  ASSERT_GE(dones.size(), 3u);
  EXPECT_EQ(dones.front(), 0);
  EXPECT_EQ(dones.back(), 400);
  for (size_t i = 1; i < dones.size(); ++i) EXPECT_GE(dones[i], dones[i - 1]);
  EXPECT_TRUE(std::any_of(dones.begin(), dones.end(), [](int64_t v) { return v > 0 && v < 400; }));
}

TEST(ChunkPolicy, ACancelStopsThePassBetweenParts) {
  auto loop = policy_loop(1, 0.001);  // a unit or so per step
  ASSERT_TRUE(loop);
  const int64_t n = 1500;
  auto h = loop->submit(greedy(ramp(static_cast<int>(n)), 2));
  ASSERT_TRUE(h.ok());
  ServeEvent e;
  // Cancel once the pass has done part of its chunk.
  for (;;) {
    ASSERT_TRUE((*h)->next(&e, 60000));
    if (e.kind == ServeEvent::Kind::kProgress && e.done > 0) break;
  }
  EXPECT_LT(e.done, n);
  (*h)->cancel();
  do {
    ASSERT_TRUE((*h)->next(&e, 60000));
  } while (e.kind == ServeEvent::Kind::kProgress);
  ASSERT_EQ(e.kind, ServeEvent::Kind::kFailed);
  EXPECT_EQ(e.status.code(), absl::StatusCode::kCancelled) << e.status;
  const EngineCounters c = loop->counters();
  EXPECT_LT(c.prefill_tokens, static_cast<uint64_t>(n));
  EXPECT_EQ(c.cancelled, 1u);
  EXPECT_EQ(c.sessions_busy, 0u);
  // The session serves again, from scratch.
  auto again = loop->submit(greedy(ramp(20), 2));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(read_all(**again).back().kind, ServeEvent::Kind::kFinished);
}

TEST(ChunkPolicy, BigChunksEndAtSnapshotPositions) {
  // Snapshots every 64 tokens: the first chunk is the largest (2048, a
  // multiple of 64) and its end is saved; the next ends at the last
  // snapshot position before the prompt's end (2176, saved), the last 24
  // tokens end with the prompt.
  auto loop = policy_loop(1, 0, 256u << 20, 64);
  ASSERT_TRUE(loop);
  const auto prompt = ramp(2200);
  auto h = loop->submit(greedy(prompt, 2));
  ASSERT_TRUE(h.ok());
  std::vector<ServeEvent> ev = read_all(**h);
  ASSERT_EQ(ev.back().kind, ServeEvent::Kind::kFinished) << ev.back().status;
  EXPECT_EQ(loop->counters().snapshots_saved, 2u);
  // An edit at 2100 resumes from the snapshot at 2048.
  auto edited = prompt;
  edited[2100] = 7;
  auto h2 = loop->submit(greedy(edited, 2));
  ASSERT_TRUE(h2.ok());
  ev = read_all(**h2);
  ASSERT_EQ(ev.back().kind, ServeEvent::Kind::kFinished) << ev.back().status;
  EXPECT_EQ(ev.front().plan.restored, 2048);
  // And gives what a fresh read of the edited prompt gives.
  EXPECT_EQ(answer_of(ev), alone(make_loop(1), edited, 2));
}

}  // namespace
}  // namespace k3::engined
