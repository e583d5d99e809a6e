// The matcher's single-stack fast path steps exactly as the general forking
// walk: on random walks through several grammars, every one of the 260
// symbols gives the same verdict and the same next state either way.
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shared/grammar/matcher.h"
#include "shared/grammar/output_forms.h"

namespace k3::grammar {
namespace {

using nlohmann::json;

void expect_same_steps(const std::shared_ptr<const Grammar>& g, int walks, int steps) {
  const Matcher fast(g, /*fast_path=*/true), general(g, /*fast_path=*/false);
  for (int seed = 0; seed < walks; ++seed) {
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    State st = fast.start();
    ASSERT_EQ(st.key(), general.start().key());
    for (int t = 0; t < steps; ++t) {
      std::vector<State> next;
      for (int sym = 0; sym < kNumSymbols; ++sym) {
        State a, b;
        const bool ok = fast.feed(st, sym, &a);
        ASSERT_EQ(ok, general.feed(st, sym, &b)) << "seed " << seed << " step " << t << " " << sym;
        ASSERT_EQ(a.key(), b.key()) << "seed " << seed << " step " << t << " symbol " << sym;
        EXPECT_EQ(fast.distance(a), general.distance(b));
        if (ok) next.push_back(std::move(a));
      }
      if (next.empty()) break;
      st = next[rng() % next.size()];
    }
  }
}

std::shared_ptr<const Grammar> document(const char* schema) {
  const nlohmann::ordered_json s = nlohmann::ordered_json::parse(schema);
  auto g = json_document_grammar(&s);
  EXPECT_TRUE(g.ok()) << g.status();
  return *g;
}

TEST(Matcher, FastPathStepsAsTheGeneralWalk) {
  for (const char* schema : {
           R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},
              "age":{"type":"integer","minimum":-5,"maximum":150},
              "tags":{"type":"array","items":{"enum":["a","bc"]},"minItems":1,"maxItems":3}},
              "required":["name"],"additionalProperties":{"type":"number"}})",
           R"({"oneOf":[{"type":"integer"},{"type":"number"},{"const":"x"}]})",
           R"({"anyOf":[{"type":"string","pattern":"^a+b?$"},{"type":"array"}]})",
           R"({"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},
              "kids":{"type":"array","items":{"$ref":"#/$defs/n"},"maxItems":2}},
              "required":["v"]}},"$ref":"#/$defs/n"})",
           R"({"type":"string","minLength":2,"maxLength":5})",
       }) {
    SCOPED_TRACE(schema);
    expect_same_steps(document(schema), 12, 40);
  }
  auto any = json_document_grammar(nullptr);
  ASSERT_TRUE(any.ok());
  expect_same_steps(*any, 12, 40);
  OutputSpec spec;
  spec.thinking = true;
  spec.body = OutputSpec::Body::kJsonObject;
  spec.tool_choice = OutputSpec::ToolChoice::kAuto;
  spec.tools.push_back({"f", json::parse(R"({"type":"object","properties":{
      "a":{"type":"string","maxLength":3},"b":{"type":"boolean"}},"required":["a"]})")});
  auto out = output_grammar(spec);
  ASSERT_TRUE(out.ok()) << out.status();
  SCOPED_TRACE("thinking + json_object + tools");
  expect_same_steps(*out, 12, 80);
}

}  // namespace
}  // namespace k3::grammar
