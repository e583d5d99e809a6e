// The sampling ranges both daemons enforce (shared/api/request_limits.h):
// every field at and past its bounds, NaN, and the vocabulary bound of
// logit_bias only where the vocabulary is known.
#include "shared/api/request_limits.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>

namespace k3::api {
namespace {

using Params = k3serve::v1::SamplingParams;

Params neutral() {
  Params p;
  p.set_temperature(1);
  p.set_top_p(1);
  p.set_repetition_penalty(1);
  return p;
}

std::string refusal(const std::function<void(Params&)>& edit, int64_t vocab = 16) {
  Params p = neutral();
  edit(p);
  const Status s = validate_sampling(p, vocab);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  return msg(s);
}

TEST(RequestLimits, BoundsAreInclusiveWhereTheApiSaysSo) {
  for (auto edit : std::vector<std::function<void(Params&)>>{
           [](Params& p) { p.set_temperature(0); }, [](Params& p) { p.set_temperature(2); },
           [](Params& p) { p.set_top_p(1e-6f); }, [](Params& p) { p.set_top_k(-1); },
           [](Params& p) { p.set_top_k(0); }, [](Params& p) { p.set_min_p(1); },
           [](Params& p) { p.set_presence_penalty(-2); },
           [](Params& p) { p.set_frequency_penalty(2); },
           [](Params& p) { p.set_repetition_penalty(10); },
           [](Params& p) { (*p.mutable_logit_bias())[15] = -100; }}) {
    Params p = neutral();
    edit(p);
    EXPECT_TRUE(validate_sampling(p, 16).ok()) << p.ShortDebugString();
  }
}

TEST(RequestLimits, RefusalsNameTheField) {
  EXPECT_EQ(refusal([](Params& p) { p.set_temperature(2.5f); }),
            "'temperature' must be between 0 and 2");
  EXPECT_EQ(refusal([](Params& p) { p.set_temperature(-0.1f); }),
            "'temperature' must be between 0 and 2");
  EXPECT_EQ(refusal([](Params& p) { p.set_temperature(std::nanf("")); }),
            "'temperature' must be between 0 and 2");
  EXPECT_EQ(refusal([](Params& p) { p.set_top_p(0); }),
            "'top_p' must be greater than 0 and at most 1");
  EXPECT_EQ(refusal([](Params& p) { p.set_top_p(1.5f); }),
            "'top_p' must be greater than 0 and at most 1");
  EXPECT_EQ(refusal([](Params& p) { p.set_top_k(-2); }),
            "'top_k' must be -1 (no limit), 0 (no limit) or more");
  EXPECT_EQ(refusal([](Params& p) { p.set_min_p(1.5f); }), "'min_p' must be between 0 and 1");
  EXPECT_EQ(refusal([](Params& p) { p.set_frequency_penalty(-3); }),
            "'frequency_penalty' must be between -2 and 2");
  EXPECT_EQ(refusal([](Params& p) { p.set_repetition_penalty(11); }),
            "'repetition_penalty' must be greater than 0 and at most 10");
  EXPECT_EQ(refusal([](Params& p) { (*p.mutable_logit_bias())[-1] = 1; }),
            "'logit_bias' names token -1, a negative id");
  EXPECT_EQ(refusal([](Params& p) { (*p.mutable_logit_bias())[16] = 1; }),
            "'logit_bias' names token 16, outside the vocabulary [0, 16)");
  EXPECT_EQ(refusal([](Params& p) { (*p.mutable_logit_bias())[3] = std::nanf(""); }),
            "'logit_bias' of token 3 must be between -100 and 100");
  // Several bad entries: the lowest id is named, whatever the map's order.
  EXPECT_EQ(refusal([](Params& p) {
              for (int id : {900, 3, 40, -5, 7}) (*p.mutable_logit_bias())[id] = 500;
            }),
            "'logit_bias' names token -5, a negative id");
}

TEST(RequestLimits, BanningTheWholeVocabularyIsRefused) {
  Params p = neutral();
  for (int id = 0; id < 15; ++id) (*p.mutable_logit_bias())[id] = -100;
  EXPECT_TRUE(validate_sampling(p, 16).ok());
  (*p.mutable_logit_bias())[15] = -99.5f;
  EXPECT_TRUE(validate_sampling(p, 16).ok());
  (*p.mutable_logit_bias())[15] = -100;
  const Status s = validate_sampling(p, 16);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(std::string(s.message()).find("'logit_bias' bans every token"), std::string::npos) << s;
  // An unknown vocabulary cannot tell.
  EXPECT_TRUE(validate_sampling(p, 0).ok());
}

TEST(RequestLimits, AnUnknownVocabularyBoundsIdsBelowOnly) {
  Params p = neutral();
  (*p.mutable_logit_bias())[1 << 20] = 5;
  EXPECT_TRUE(validate_sampling(p, 0).ok());
  EXPECT_FALSE(validate_sampling(p, 16).ok());
}

}  // namespace
}  // namespace k3::api
