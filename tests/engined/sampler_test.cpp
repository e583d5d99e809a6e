// The sampler's processors, each checked by an exact property on known logits.
#include "engined/sampler.h"

#include <gtest/gtest.h>

#include "shared/api/request_limits.h"

#include <cmath>
#include <map>
#include <set>

namespace k3::engined {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, -2.0f, 2.5f, 0.0f, -0.5f, 2.9f, 1.5f};
constexpr int64_t V = 8;

TEST(Sampler, TopKOneIsGreedyAtAnyTemperature) {
  for (float t : {0.0f, 0.3f, 1.0f, 5.0f, 80.0f}) {
    SamplingParams p;
    p.temperature = t;
    p.top_k = 1;
    p.seed = 7;
    Sampler s(p);
    for (int i = 0; i < 50; ++i) EXPECT_EQ(s.sample(kLogits.data(), V), 1) << t;
  }
}

TEST(Sampler, LogitBiasOfMinus100BansAndOthersAreAdded) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.logit_bias = {{1, -100.0f}, {4, 2.0f}};
  Sampler s(p);
  std::vector<float> x;
  s.process(kLogits.data(), V, nullptr, &x);
  EXPECT_TRUE(std::isinf(x[1]) && x[1] < 0);
  EXPECT_EQ(x[4], kLogits[4] + 2.0f);
  EXPECT_EQ(x[0], kLogits[0]);
  for (int i = 0; i < 5000; ++i) ASSERT_NE(s.sample(kLogits.data(), V), 1);
  SamplingParams g = p;
  g.temperature = 0;  // greedy takes the best token still allowed
  EXPECT_EQ(Sampler(g).sample(kLogits.data(), V), 6);
}

TEST(Sampler, PresenceAndFrequencyPenaltiesFollowTheFormula) {
  SamplingParams p;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  Sampler s(p);  // greedy
  // Generate 1, 1, then 6 is best (3.0 - 0.5 - 0.5 = 2.0 < 2.9).
  EXPECT_EQ(s.sample(kLogits.data(), V), 1);  // 3.0
  EXPECT_EQ(s.sample(kLogits.data(), V), 6);  // 1 now 3.0 - 0.5 - 0.25 = 2.25
  std::vector<float> x;
  s.process(kLogits.data(), V, nullptr, &x);
  EXPECT_EQ(x[1], kLogits[1] - 0.5f - 0.25f * 1);
  EXPECT_EQ(x[6], kLogits[6] - 0.5f - 0.25f * 1);
  EXPECT_EQ(x[3], kLogits[3]);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveMultipliesNegativeSparesControlTokens) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  Sampler s(p);
  s.set_context({1, 2, 7}, {7});
  std::vector<float> x;
  s.process(kLogits.data(), V, nullptr, &x);
  EXPECT_EQ(x[1], kLogits[1] / 2.0f);
  EXPECT_EQ(x[2], kLogits[2] * 2.0f);
  EXPECT_EQ(x[7], kLogits[7]);  // exempt (a control token)
  EXPECT_EQ(x[3], kLogits[3]);
}

TEST(Sampler, MinPDropsTokensBelowItsShareOfTheTop) {
  // Probabilities 0.5, 0.3, 0.15, 0.05 at temperature 1.
  const std::vector<float> l = {std::log(0.5f), std::log(0.3f), std::log(0.15f), std::log(0.05f)};
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.2f;  // keep p >= 0.1
  p.seed = 3;
  Sampler s(p);
  std::map<int32_t, int> n;
  for (int i = 0; i < 20000; ++i) ++n[s.sample(l.data(), 4)];
  EXPECT_EQ(n[3], 0);
  // The rest renormalised: 0.5/0.95, 0.3/0.95, 0.15/0.95.
  EXPECT_NEAR(n[0] / 20000.0, 0.5 / 0.95, 0.02);
  EXPECT_NEAR(n[1] / 20000.0, 0.3 / 0.95, 0.02);
  EXPECT_NEAR(n[2] / 20000.0, 0.15 / 0.95, 0.02);
}

TEST(Sampler, TheMaskForbidsAndTheSeedReproduces) {
  SamplingParams p;
  p.temperature = 2.0f;
  p.seed = 11;
  std::vector<uint8_t> mask(V, 1);
  mask[1] = mask[6] = 0;
  Sampler a(p), b(p);
  std::vector<int32_t> sa, sb;
  for (int i = 0; i < 200; ++i) {
    sa.push_back(a.sample(kLogits.data(), V, mask.data()));
    sb.push_back(b.sample(kLogits.data(), V, mask.data()));
    ASSERT_NE(sa.back(), 1);
    ASSERT_NE(sa.back(), 6);
  }
  EXPECT_EQ(sa, sb);
  p.seed = 12;
  Sampler c(p);
  std::vector<int32_t> sc;
  for (int i = 0; i < 200; ++i) sc.push_back(c.sample(kLogits.data(), V, mask.data()));
  EXPECT_NE(sa, sc);
}

TEST(Sampler, LogprobsAreTheModelsLogSoftmax) {
  double m = 3.0, s = 0;
  for (float v : kLogits) s += std::exp(v - m);
  const TokenLogprobs lp = token_logprobs(kLogits.data(), V, 3, 3);
  EXPECT_NEAR(lp.chosen, kLogits[3] - (m + std::log(s)), 1e-6);
  ASSERT_EQ(lp.top.size(), 3u);
  EXPECT_EQ(lp.top[0].first, 1);
  EXPECT_EQ(lp.top[1].first, 6);
  EXPECT_EQ(lp.top[2].first, 3);
  EXPECT_NEAR(lp.top[2].second, lp.chosen, 1e-7);
}

// engined checks its parameters with the front door's ranges
// (shared/api/request_limits.h, tested there field by field): what the
// gateway refuses, engined refuses, with the same message.
TEST(Sampler, ValidationIsTheFrontDoors) {
  auto check = [](auto edit) {
    SamplingParams p;
    edit(p);
    return api::validate_sampling(to_wire(p), V);
  };
  EXPECT_TRUE(check([](SamplingParams&) {}).ok());
  EXPECT_EQ(msg(check([](SamplingParams& p) { p.temperature = 3; })),
            "'temperature' must be between 0 and 2");
  EXPECT_EQ(msg(check([](SamplingParams& p) { p.top_p = 0; })),
            "'top_p' must be greater than 0 and at most 1");
  EXPECT_EQ(msg(check([](SamplingParams& p) { p.min_p = 2; })), "'min_p' must be between 0 and 1");
  EXPECT_EQ(msg(check([](SamplingParams& p) { p.presence_penalty = 3; })),
            "'presence_penalty' must be between -2 and 2");
  EXPECT_EQ(msg(check([](SamplingParams& p) { p.repetition_penalty = 0; })),
            "'repetition_penalty' must be greater than 0 and at most 10");
  EXPECT_EQ(msg(check([](SamplingParams& p) { p.logit_bias[V] = 1; })),
            "'logit_bias' names token 8, outside the vocabulary [0, 8)");
  EXPECT_EQ(msg(check([](SamplingParams& p) { p.logit_bias[0] = 101; })),
            "'logit_bias' of token 0 must be between -100 and 100");
  EXPECT_EQ(msg(check([](SamplingParams& p) { p.top_k = -2; })),
            "'top_k' must be -1 (no limit), 0 (no limit) or more");
  EXPECT_TRUE(check([](SamplingParams& p) { p.top_k = -1; }).ok()) << "-1: no limit, as 0";
}

TEST(Sampler, GreedyTopKAndSeeds) {
  std::vector<float> logits = {0.1f, 2.0f, 1.9f, -1.0f, 2.0f};
  Sampler greedy(SamplingParams{});
  EXPECT_EQ(greedy.sample(logits.data(), 5), 1) << "ties go to the lower id";
  Sampler top1({1.0f, 1.0f, 1, 0});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(top1.sample(logits.data(), 5), 1);
  Sampler nucleus({1.0f, 0.01f, 0, 0});
  for (int i = 0; i < 20; ++i) EXPECT_EQ(nucleus.sample(logits.data(), 5), 1);
  // Same seed, same draws; a hot temperature visits several ids.
  Sampler a({5.0f, 1.0f, 0, 42}), b({5.0f, 1.0f, 0, 42});
  std::set<int32_t> seen;
  for (int i = 0; i < 200; ++i) {
    const int32_t x = a.sample(logits.data(), 5);
    EXPECT_EQ(x, b.sample(logits.data(), 5));
    seen.insert(x);
  }
  EXPECT_GE(seen.size(), 4u);
  // top_k = 2 never leaves the two best.
  Sampler k2({5.0f, 1.0f, 2, 1});
  for (int i = 0; i < 100; ++i) {
    const int32_t x = k2.sample(logits.data(), 5);
    EXPECT_TRUE(x == 1 || x == 4) << x;
  }
}

}  // namespace
}  // namespace k3::engined
