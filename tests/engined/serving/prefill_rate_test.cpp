// engined's measured prefill rate: no rate before a sample, the ratio of
// exponentially decayed token and second sums after, steps without prefill
// or without a measurable time ignored, and the time left it gives (shared
// by the prompts read together).
#include "engined/serving/prefill_rate.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

namespace k3::engined {
namespace {

TEST(PrefillRate, NoRateBeforeTheFirstSample) {
  PrefillRate r;
  EXPECT_EQ(r.tokens_per_second(), 0.0);
  EXPECT_LT(r.eta_seconds(100), 0);
  EXPECT_EQ(r.eta_seconds(0), 0.0) << "nothing left takes no time";
}

TEST(PrefillRate, OneSampleIsTheRate) {
  PrefillRate r;
  r.add(64, 2.0);
  EXPECT_DOUBLE_EQ(r.tokens_per_second(), 32.0);
  EXPECT_DOUBLE_EQ(r.eta_seconds(96), 3.0);
  EXPECT_EQ(r.eta_seconds(0), 0.0);
  EXPECT_EQ(r.eta_seconds(-5), 0.0);
}

// Samples weigh by their size, older ones less by kDecay per later sample.
TEST(PrefillRate, DecayedSumsOfTokensAndSeconds) {
  PrefillRate r;
  r.add(100, 1.0);  // 100 tokens/s
  r.add(10, 1.0);   // 10 tokens/s
  const double d = PrefillRate::kDecay;
  EXPECT_DOUBLE_EQ(r.tokens_per_second(), (100 * d + 10) / (1 * d + 1));
  // A steady new rate takes over: after 30 steps at 10 tokens/s the first
  // sample's weight (0.8^30 ~ 0.001) is gone.
  for (int i = 0; i < 30; ++i) r.add(10, 1.0);
  EXPECT_NEAR(r.tokens_per_second(), 10.0, 0.1);
  // A big piece counts more than a small one at the same time weight.
  PrefillRate big_first;
  big_first.add(1000, 10.0);  // 100 tokens/s over 10 s
  big_first.add(1, 1.0);      // 1 token/s over 1 s
  EXPECT_GT(big_first.tokens_per_second(), 50.0);
}

// Prompts read together: each step carries one piece of each, so each gets
// its share of the rate.
TEST(PrefillRate, PromptsReadTogetherShareTheRate) {
  PrefillRate r;
  r.add(64, 2.0);  // 32 tokens/s for all prompts together
  EXPECT_DOUBLE_EQ(r.eta_seconds(96, 1), 3.0);
  EXPECT_DOUBLE_EQ(r.eta_seconds(96, 2), 6.0);
  EXPECT_DOUBLE_EQ(r.eta_seconds(96, 0), 3.0) << "fewer than one counts as one";
  EXPECT_EQ(r.eta_seconds(0, 3), 0.0);
}

TEST(PrefillRate, StepsWithoutPrefillOrMeasurableTimeAreNoSample) {
  PrefillRate r;
  r.add(0, 1.0);
  r.add(-3, 1.0);
  r.add(50, 0.0);
  r.add(50, -1.0);
  r.add(50, std::numeric_limits<double>::quiet_NaN());
  r.add(50, std::numeric_limits<double>::infinity());
  EXPECT_EQ(r.tokens_per_second(), 0.0);
  EXPECT_LT(r.eta_seconds(10), 0);
  r.add(50, 0.5);
  r.add(0, 100.0);  // a decode-only step: the rate stays
  EXPECT_DOUBLE_EQ(r.tokens_per_second(), 100.0);
  EXPECT_TRUE(std::isfinite(r.eta_seconds(1'000'000)));
}

}  // namespace
}  // namespace k3::engined
