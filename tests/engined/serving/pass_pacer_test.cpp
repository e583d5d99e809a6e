// A big chunk's pass paced between decode steps: a part's budget follows the
// smaller of the other sessions' last step and their running mean (x 1.5,
// within [0.1, 2] s), a second when the pass runs alone, a fixed budget when
// one is set; a pass's parts count as tokens read only when they move a whole
// token, their seconds kept until they do.
#include "engined/serving/pass_pacer.h"

#include <gtest/gtest.h>

namespace k3::engined {
namespace {

TEST(PassPacer, AlonePartsLastASecond) {
  PassPacer p(0);
  EXPECT_DOUBLE_EQ(p.part_budget(std::nullopt), PassPacer::kAloneSeconds);
  EXPECT_DOUBLE_EQ(p.part_budget(std::nullopt), 1.0);
}

TEST(PassPacer, BesideDecodersAPartIsOneAndAHalfSteps) {
  PassPacer p(0);
  EXPECT_DOUBLE_EQ(p.part_budget(0.2), 1.5 * 0.2);
  EXPECT_DOUBLE_EQ(p.part_budget(0.2), 1.5 * 0.2);
}

// One slow step (its reads queued behind the pass's) does not lengthen the
// next part: the running mean is smaller than it.
TEST(PassPacer, ASlowStepIsFollowedByTheMeanNotByItself) {
  PassPacer p(0);
  p.part_budget(0.2);
  const double after_slow = p.part_budget(0.6);  // mean 0.75 * 0.2 + 0.25 * 0.6 = 0.3
  EXPECT_DOUBLE_EQ(after_slow, 1.5 * 0.3);
  EXPECT_LT(after_slow, 1.5 * 0.6);
  // A fast step is followed by itself.
  EXPECT_DOUBLE_EQ(p.part_budget(0.1), 1.5 * 0.1);
}

TEST(PassPacer, BudgetsStayWithinTheirBounds) {
  PassPacer fast(0);
  EXPECT_DOUBLE_EQ(fast.part_budget(0.001), PassPacer::kMinSeconds);
  // The real model's 5 s decode steps: a part is never longer than 2 s.
  PassPacer real(0);
  EXPECT_DOUBLE_EQ(real.part_budget(5.0), PassPacer::kMaxSeconds);
  EXPECT_DOUBLE_EQ(real.part_budget(5.0), 2.0);
}

TEST(PassPacer, AFixedBudgetIsEveryPartsBudget) {
  PassPacer p(0.05);
  EXPECT_DOUBLE_EQ(p.part_budget(std::nullopt), 0.05);
  EXPECT_DOUBLE_EQ(p.part_budget(3.0), 0.05);
}

TEST(PassProgress, PartsThatMoveNoWholeTokenKeepTheirSeconds) {
  PassProgress g;
  PrefillRate rate;
  EXPECT_EQ(g.add_part(0, 0.5, &rate), 0);
  EXPECT_EQ(rate.tokens_per_second(), 0.0) << "no sample before a token moved";
  EXPECT_EQ(g.add_part(0, 0.5, &rate), 0);
  // The third part moves 10 tokens: the sample has all three parts' seconds.
  EXPECT_EQ(g.add_part(10, 1.0, &rate), 10);
  EXPECT_DOUBLE_EQ(rate.tokens_per_second(), 10 / 2.0);
  EXPECT_EQ(g.done(), 10);
  EXPECT_EQ(g.add_part(25, 1.5, &rate), 15);
  EXPECT_EQ(g.done(), 25);
  g.reset();
  EXPECT_EQ(g.done(), 0);
}

}  // namespace
}  // namespace k3::engined
