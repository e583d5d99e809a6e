// n > 1 choices in engined's serving loop on the tiny model: the prompt is
// prefilled once and the state forked per choice; choice i generates exactly
// (token ids and logprobs, bit for bit) what a lone request with seed + i
// generates, stops on its own, and one cancel ends them all.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>

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

ServeRequest sampled(std::vector<int32_t> prompt, int64_t max_tokens, uint64_t seed, int n = 1) {
  ServeRequest r;
  r.request_id = "choices";
  r.prompt = std::move(prompt);
  r.max_tokens = max_tokens;
  r.sampling.temperature = 1.0f;
  r.sampling.seed = seed;
  r.logprobs = true;
  r.top_logprobs = 3;
  r.n = n;
  return r;
}

struct Choice {
  std::vector<int32_t> tokens;
  std::vector<TokenLogprobs> logprobs;
  std::optional<ServeEvent> finished;
};

struct Outcome {
  int started = 0;
  std::map<int, Choice> choices;
  std::vector<int> order;  // the choice of each token event, in arrival order
  std::optional<ServeEvent> failed;
};

// Reads every event until each of `n` choices finished or the request
// failed; cancels after `cancel_after` tokens in all.
Outcome collect(RequestHandle& h, int n, int cancel_after = -1) {
  Outcome o;
  int finished = 0, tokens = 0;
  ServeEvent e;
  while (finished < n) {
    if (!h.next(&e, 60000)) {
      ADD_FAILURE() << "no event within 60 s";
      return o;
    }
    switch (e.kind) {
      case ServeEvent::Kind::kStarted:
        ++o.started;
        break;
      case ServeEvent::Kind::kProgress:  // engine_loop_prefill_test.cpp
        break;
      case ServeEvent::Kind::kToken:
        o.choices[e.choice].tokens.push_back(e.token);
        if (e.logprobs) o.choices[e.choice].logprobs.push_back(*e.logprobs);
        o.order.push_back(e.choice);
        if (++tokens == cancel_after) h.cancel();
        break;
      case ServeEvent::Kind::kFinished:
        EXPECT_FALSE(o.choices[e.choice].finished.has_value()) << "choice " << e.choice;
        o.choices[e.choice].finished = e;
        ++finished;
        break;
      case ServeEvent::Kind::kFailed:
        o.failed = e;
        return o;
    }
  }
  return o;
}

Outcome run(EngineLoop& loop, ServeRequest r) {
  const int n = r.n;
  auto h = loop.submit(std::move(r));
  EXPECT_TRUE(h.ok()) << h.status();
  if (!h.ok()) return {};
  return collect(**h, n);
}

bool same_bits(float a, float b) {
  return std::memcmp(&a, &b, sizeof a) == 0;
}

void expect_same_logprobs(const std::vector<TokenLogprobs>& a, const std::vector<TokenLogprobs>& b,
                          int choice) {
  ASSERT_EQ(a.size(), b.size()) << "choice " << choice;
  for (size_t t = 0; t < a.size(); ++t) {
    EXPECT_TRUE(same_bits(a[t].chosen, b[t].chosen)) << "choice " << choice << " token " << t;
    ASSERT_EQ(a[t].top.size(), b[t].top.size());
    for (size_t k = 0; k < a[t].top.size(); ++k) {
      EXPECT_EQ(a[t].top[k].first, b[t].top[k].first);
      EXPECT_TRUE(same_bits(a[t].top[k].second, b[t].top[k].second))
          << "choice " << choice << " token " << t << " top " << k;
    }
  }
}

TEST(Choices, EachChoiceIsALoneRequestWithSeedPlusIAndThePromptIsPrefilledOnce) {
  const auto prompt = ramp(37);
  const uint64_t seed = 1234;
  const int64_t max_tokens = 14;
  // The lone requests, each in a fresh engine (no session to continue).
  std::vector<Choice> alone;
  for (int i = 0; i < 3; ++i) {
    auto loop = make_loop(1);
    Outcome o = run(*loop, sampled(prompt, max_tokens, seed + static_cast<uint64_t>(i)));
    ASSERT_FALSE(o.failed) << o.failed->status;
    alone.push_back(o.choices[0]);
  }
  // A stop id that ends choice 1 early (its third token), so the choices
  // end differently; the lone runs again with it.
  const int32_t stop = alone[1].tokens[2];
  for (int i = 0; i < 3; ++i) {
    auto loop = make_loop(1);
    ServeRequest r = sampled(prompt, max_tokens, seed + static_cast<uint64_t>(i));
    r.stop_ids = {stop};
    Outcome o = run(*loop, std::move(r));
    ASSERT_FALSE(o.failed) << o.failed->status;
    alone[static_cast<size_t>(i)] = o.choices[0];
  }
  ASSERT_EQ(alone[1].finished->reason, StopReason::kStop);
  ASSERT_LE(alone[1].tokens.size(), 3u);

  auto loop = make_loop(3);
  const EngineCounters before = loop->counters();
  ServeRequest r = sampled(prompt, max_tokens, seed, 3);
  r.stop_ids = {stop};
  Outcome o = run(*loop, std::move(r));
  ASSERT_FALSE(o.failed) << o.failed->status;
  EXPECT_EQ(o.started, 1);
  ASSERT_EQ(o.choices.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    const Choice& c = o.choices[i];
    const Choice& a = alone[static_cast<size_t>(i)];
    EXPECT_EQ(c.tokens, a.tokens) << "choice " << i;
    expect_same_logprobs(c.logprobs, a.logprobs, i);
    ASSERT_TRUE(c.finished.has_value());
    EXPECT_EQ(c.finished->reason, a.finished->reason) << "choice " << i;
    EXPECT_EQ(c.finished->completion_tokens, static_cast<int64_t>(a.tokens.size()));
    EXPECT_EQ(c.finished->prompt_tokens, static_cast<int64_t>(prompt.size()));
  }
  // The seeds make the choices differ (not one sequence three times).
  EXPECT_NE(o.choices[0].tokens, o.choices[2].tokens);
  // The choices decode together: choice 2's first token comes before
  // choice 0's last.
  const auto first2 = std::find(o.order.begin(), o.order.end(), 2) - o.order.begin();
  const auto last0 = std::find(o.order.rbegin(), o.order.rend(), 0).base() - o.order.begin() - 1;
  EXPECT_LT(first2, last0);

  // One prefill: the prompt's tokens once, one request.
  const EngineCounters after = loop->counters();
  EXPECT_EQ(after.prefill_tokens - before.prefill_tokens, prompt.size());
  EXPECT_EQ(after.prompt_tokens - before.prompt_tokens, prompt.size());
  EXPECT_EQ(after.requests - before.requests, 1u);
  size_t generated = 0;
  for (const Choice& a : alone) generated += a.tokens.size();
  EXPECT_EQ(after.generated_tokens - before.generated_tokens, generated);
  EXPECT_EQ(after.sessions_busy, 0u);
}

TEST(Choices, ACancelEndsEveryChoiceOnceAndFreesTheirSessions) {
  auto loop = make_loop(3);
  auto h = loop->submit(sampled(ramp(9), 100000, 7, 3));
  ASSERT_TRUE(h.ok()) << h.status();
  Outcome o = collect(**h, 3, /*cancel_after=*/6);
  ASSERT_TRUE(o.failed.has_value());
  EXPECT_EQ(o.failed->status.code(), absl::StatusCode::kCancelled) << o.failed->status;
  // The one kFailed is the request's last event (the other choices leave
  // silently).
  ServeEvent e;
  EXPECT_FALSE((*h)->next(&e, 300));
  const EngineCounters c = loop->counters();
  EXPECT_EQ(c.cancelled, 1u);
  EXPECT_EQ(c.sessions_busy, 0u);
  EXPECT_LT(c.generated_tokens, 300u);
  // All three sessions are free again: another three-choice request runs.
  Outcome next = run(*loop, sampled(ramp(9), 2, 8, 3));
  EXPECT_FALSE(next.failed);
  EXPECT_EQ(next.choices.size(), 3u);
}

TEST(Choices, WaitsForAsManyFreeSessionsAsChoices) {
  auto loop = make_loop(2);
  // One session busy with a long request: the two-choice request does not
  // start while it runs, and does once it is gone.
  auto busy = loop->submit(sampled(ramp(9), 100000, 1));
  ASSERT_TRUE(busy.ok());
  ServeEvent e;
  ASSERT_TRUE((*busy)->next(&e, 60000));
  ASSERT_EQ(e.kind, ServeEvent::Kind::kStarted);
  auto two = loop->submit(sampled(ramp(11), 3, 2, 2));
  ASSERT_TRUE(two.ok());
  EXPECT_FALSE((*two)->next(&e, 500)) << "started with one free session";
  (*busy)->cancel();
  Outcome o = collect(**two, 2);
  ASSERT_FALSE(o.failed) << o.failed->status;
  EXPECT_EQ(o.started, 1);
  EXPECT_EQ(o.choices[0].tokens.size(), 3u);
  EXPECT_EQ(o.choices[1].tokens.size(), 3u);
}

TEST(Choices, RefusesMoreChoicesThanTheLimitOrTheSessions) {
  auto loop = make_loop(2);
  auto nine = loop->submit(sampled(ramp(5), 3, 1, 9));
  ASSERT_EQ(nine.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(nine.status().message().find("[1, 8]"), std::string::npos) << nine.status();
  auto three = loop->submit(sampled(ramp(5), 3, 1, 3));
  ASSERT_EQ(three.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(three.status().message().find("2 sessions"), std::string::npos) << three.status();
  EXPECT_EQ(loop->submit(sampled(ramp(5), 3, 1, 0)).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace k3::engined
