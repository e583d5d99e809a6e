// Sampling defaults from generation_config.json, and the client's fields
// over them (gateway/core/sampling_defaults.h).
#include "gateway/core/sampling_defaults.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace k3::gateway {
namespace {

TEST(GenerationConfig, ReadsTheSamplingKeys) {
  auto d = parse_generation_config(
      R"({"temperature": 0.6, "top_p": 0.95, "top_k": 20, "min_p": 0.01,
          "repetition_penalty": 1.05, "presence_penalty": 0.25, "frequency_penalty": -0.5,
          "eos_token_id": [1, 2], "do_sample": true})",
      "g");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->temperature, 0.6f);
  EXPECT_EQ(d->top_p, 0.95f);
  EXPECT_EQ(d->top_k, 20);
  EXPECT_EQ(d->min_p, 0.01f);
  EXPECT_EQ(d->repetition_penalty, 1.05f);
  EXPECT_EQ(d->presence_penalty, 0.25f);
  EXPECT_EQ(d->frequency_penalty, -0.5f);
}

TEST(GenerationConfig, OpenAiDefaultsAndDoSample) {
  auto d = parse_generation_config("{}", "g");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->temperature, 1.0f);
  EXPECT_EQ(d->top_p, 1.0f);
  EXPECT_EQ(d->top_k, 0);
  EXPECT_EQ(d->repetition_penalty, 1.0f);
  // do_sample false: greedy, whatever temperature the file gives.
  d = parse_generation_config(R"({"do_sample": false, "temperature": 0.7})", "g");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->temperature, 0.0f);
  d = parse_generation_config(R"({"top_k": -1})", "g");
  ASSERT_TRUE(d.ok());
  EXPECT_EQ(d->top_k, 0);
}

TEST(GenerationConfig, BadValuesNameTheFileAndKey) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"temperature": "hot"})", "g.json: 'temperature' must be a number"},
      {R"({"top_p": 0})", "g.json: 'top_p' must be greater than 0 and at most 1"},
      {R"({"top_k": 2.5})", "g.json: 'top_k' must be an integer"},
      {R"({"repetition_penalty": -1})", "g.json: 'repetition_penalty' must be greater than 0"},
      {R"({"do_sample": 1})", "g.json: 'do_sample' must be a boolean"},
      {R"([1])", "g.json must be a JSON object"},
  };
  for (const auto& [text, want] : cases) {
    auto d = parse_generation_config(text, "g.json");
    ASSERT_FALSE(d.ok()) << text;
    EXPECT_EQ(msg(d.status()).rfind(want, 0), 0u) << text << ": " << msg(d.status());
  }
}

TEST(GenerationConfig, LoadsTheModelsFileOrDefaults) {
  testing::TempDir dir;
  auto none = load_generation_config(dir.path());
  ASSERT_TRUE(none.ok()) << none.status();
  EXPECT_EQ(none->temperature, 1.0f);
  testing::write_file(dir.file("generation_config.json"), R"({"top_p": 0.5})");
  auto some = load_generation_config(dir.path());
  ASSERT_TRUE(some.ok()) << some.status();
  EXPECT_EQ(some->top_p, 0.5f);
  // The tiny model's (tools/mkmodel): temperature 1, top_p 0.95.
  auto tiny = load_generation_config(testing::tiny_model_dir());
  ASSERT_TRUE(tiny.ok()) << tiny.status();
  EXPECT_EQ(tiny->top_p, 0.95f);
}

TEST(ResolveSampling, ClientFieldsOverDefaults) {
  SamplingDefaults d;
  d.temperature = 0.6f;
  d.top_p = 0.9f;
  d.top_k = 50;
  d.repetition_penalty = 1.2f;
  SamplingOptions c;
  auto p = resolve_sampling(c, d);
  EXPECT_EQ(p.temperature(), 0.6f);
  EXPECT_EQ(p.top_p(), 0.9f);
  EXPECT_EQ(p.top_k(), 50);
  EXPECT_EQ(p.repetition_penalty(), 1.2f);
  EXPECT_EQ(p.min_p(), 0.0f);
  EXPECT_EQ(p.seed(), 0u);
  c.temperature = 0.0f;
  c.top_k = -1;
  c.repetition_penalty = 1.0f;
  c.presence_penalty = 0.5f;
  c.logit_bias = {{3, -100.0f}};
  c.seed = 9;  // kept aside by the generator
  p = resolve_sampling(c, d);
  EXPECT_EQ(p.temperature(), 0.0f);
  EXPECT_EQ(p.top_k(), 0);
  EXPECT_EQ(p.repetition_penalty(), 1.0f);
  EXPECT_EQ(p.presence_penalty(), 0.5f);
  EXPECT_EQ(p.logit_bias().at(3), -100.0f);
  EXPECT_EQ(p.seed(), 0u);
}

}  // namespace
}  // namespace k3::gateway
