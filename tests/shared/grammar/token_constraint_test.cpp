// The token-level constraint over a small byte-level vocabulary: random
// walks through the masks always end in valid, schema-conforming output, and
// within the token budget for bounded schemas (closing in time).
#include <algorithm>
#include <random>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "shared/chat/xtml_parser.h"
#include "shared/grammar/output_forms.h"
#include "shared/grammar/token_constraint.h"
#include "tests/shared/grammar/grammar_test_util.h"

namespace k3::grammar {
namespace {

using nlohmann::json;

// Every byte, some multi-byte pieces, then the four control tokens.
std::shared_ptr<const VocabIndex> test_vocab() {
  std::vector<std::string> bytes;
  for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
  for (const char* piece : {"{\"", "\":",      "\"}",   "\",\"", "true", "false",  "null", "name",
                            "age", "abc",      " the",  "12",    "\"\"", "[]",     "{}",   "],",
                            "é",   "\xE2\x82", "\"a\"", "tags",  "ok\"", "\":{\"", "kids", "value"})
    bytes.emplace_back(piece);
  const int32_t base = static_cast<int32_t>(bytes.size());
  for (int k = 0; k < 4; ++k) bytes.emplace_back();
  return std::make_shared<const VocabIndex>(
      VocabIndex::build(bytes, {base, base + 1, base + 2, base + 3}));
}

struct Walk {
  std::string text;  // ordinary bytes, control tokens as their markup
  bool ended = false;
  int tokens = 0;
};

Walk random_walk(const std::shared_ptr<const Constraint>& c, uint64_t seed, int budget) {
  std::mt19937_64 rng(seed);
  ConstraintState st(c);
  std::vector<uint8_t> mask;
  Walk w;
  const char* markup[4] = {"<|open|>", "<|close|>", "<|sep|>", "<|end_of_msg|>"};
  for (int t = 0; t < budget; ++t) {
    const int64_t n = st.mask(budget - t, &mask);
    EXPECT_GT(n, 0) << "a dead end after " << w.text;
    if (n == 0) break;
    std::vector<int32_t> allowed;
    for (size_t i = 0; i < mask.size(); ++i)
      if (mask[i]) allowed.push_back(static_cast<int32_t>(i));
    EXPECT_EQ(static_cast<int64_t>(allowed.size()), n);
    const int32_t id = allowed[rng() % allowed.size()];
    EXPECT_TRUE(st.accept(id).ok());
    ++w.tokens;
    const int sym = c->vocab().control_symbol(id);
    w.text += sym >= 0 ? markup[sym - 256] : c->vocab().bytes(id);
    if (sym == kSymEndOfMsg) {
      w.ended = true;
      EXPECT_TRUE(st.finished());
      break;
    }
  }
  return w;
}

std::shared_ptr<const Constraint> document(const std::string& schema) {
  const nlohmann::ordered_json s = nlohmann::ordered_json::parse(schema);
  auto g = json_document_grammar(&s);
  EXPECT_TRUE(g.ok()) << g.status();
  return Constraint::create(*g, test_vocab());
}

std::string strip_eom(const std::string& text) {
  const std::string eom = "<|end_of_msg|>";
  EXPECT_TRUE(text.ends_with(eom)) << text;
  return text.substr(0, text.size() - eom.size());
}

TEST(TokenConstraint, BoundedSchemaAlwaysEndsValidWithinBudget) {
  const std::string schema =
      R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},
          "age":{"type":"integer","minimum":0,"maximum":150},
          "tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":2},
          "ok":{"type":"boolean"}},"required":["name","age"],"additionalProperties":false})";
  auto c = document(schema);
  for (uint64_t seed = 0; seed < 60; ++seed) {
    const int budget = 30 + static_cast<int>(seed % 5) * 10;
    Walk w = random_walk(c, seed, budget);
    ASSERT_TRUE(w.ended) << "seed " << seed << " budget " << budget << ": " << w.text;
    EXPECT_LE(w.tokens, budget);
    const std::string body = strip_eom(w.text);
    json v = json::parse(body, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << body;
    ASSERT_TRUE(v.is_object());
    ASSERT_TRUE(v.contains("name") && v["name"].is_string()) << body;
    EXPECT_LE(v["name"].get<std::string>().size(), 6u * 4);
    ASSERT_TRUE(v.contains("age") && v["age"].is_number_integer()) << body;
    EXPECT_GE(v["age"].get<int64_t>(), 0);
    EXPECT_LE(v["age"].get<int64_t>(), 150);
    for (auto it = v.begin(); it != v.end(); ++it)
      EXPECT_TRUE(it.key() == "name" || it.key() == "age" || it.key() == "tags" || it.key() == "ok")
          << body;
    EXPECT_TRUE(testing::accepts(schema, body)) << body;
  }
}

// Bounded numbers under random sampling: every walk ends within its budget
// in a number inside the bounds (exactly, as decimals), even where the
// bounds leave one value.
TEST(TokenConstraint, BoundedNumbersEndWithinTheirBoundsAndBudget) {
  const std::string schema =
      R"({"type":"object","properties":{"p":{"type":"number","minimum":0.5,"maximum":0.5},
          "t":{"type":"number","exclusiveMinimum":-273.15,"maximum":1e3}},
          "required":["p","t"],"additionalProperties":false})";
  auto c = document(schema);
  const Decimal lo = *parse_decimal("-273.15"), hi = *parse_decimal("1000"),
                half = *parse_decimal("0.5");
  for (uint64_t seed = 0; seed < 60; ++seed) {
    const int budget = 20 + static_cast<int>(seed % 6) * 10;
    Walk w = random_walk(c, seed, budget);
    ASSERT_TRUE(w.ended) << "seed " << seed << " budget " << budget << ": " << w.text;
    EXPECT_LE(w.tokens, budget);
    const std::string body = strip_eom(w.text);
    // The numbers as written: "p" first or second, each up to ',' or '}'.
    for (const char* key : {"\"p\":", "\"t\":"}) {
      const size_t at = body.find(key);
      ASSERT_NE(at, std::string::npos) << body;
      const size_t from = at + 4, to = body.find_first_of(",}", from);
      const auto d = parse_decimal(body.substr(from, to - from));
      ASSERT_TRUE(d.ok()) << body;
      if (key[1] == 'p') {
        EXPECT_EQ(compare_decimals(*d, half), 0) << body;
      } else {
        EXPECT_GT(compare_decimals(*d, lo), 0) << body;
        EXPECT_LE(compare_decimals(*d, hi), 0) << body;
      }
    }
    EXPECT_TRUE(testing::accepts(schema, body)) << body;
  }
}

// The mask as the header defines it, token by token: a token is allowed when
// the automaton takes all its bytes (or its control symbol) and can then
// still reach acceptance within remaining - 1 tokens; when no token can, the
// unbounded mask.
std::vector<uint8_t> reference_mask(const Constraint& c, const State& state, int64_t remaining) {
  const VocabIndex& v = c.vocab();
  const Matcher& m = c.matcher();
  std::vector<uint8_t> bounded(static_cast<size_t>(v.vocab_size()), 0), unbounded = bounded;
  bool any = false;
  for (int32_t id = 0; id < v.vocab_size(); ++id) {
    State cur = state, next;
    bool ok = true;
    if (const int sym = v.control_symbol(id); sym >= 0) {
      ok = m.feed(cur, sym, &next);
      cur = next;
    } else if (v.bytes(id).empty()) {
      ok = false;
    } else {
      for (char ch : v.bytes(id)) {
        if (!m.feed(cur, static_cast<unsigned char>(ch), &next)) {
          ok = false;
          break;
        }
        std::swap(cur, next);
      }
    }
    if (!ok) continue;
    unbounded[static_cast<size_t>(id)] = 1;
    if (m.distance(cur) <= remaining - 1) {
      bounded[static_cast<size_t>(id)] = 1;
      any = true;
    }
  }
  return any ? bounded : unbounded;
}

// The fast mask (cold, then warm from the cache) equals the reference at
// every step of random walks under tight and loose budgets.
void expect_masks_match_reference(const std::shared_ptr<const Constraint>& c, int walks) {
  for (int seed = 0; seed < walks; ++seed) {
    std::mt19937_64 rng(static_cast<uint64_t>(seed));
    const int budget = 6 + seed * 7 % 60;
    ConstraintState st(c);
    std::vector<uint8_t> mask, again;
    for (int t = 0; t < budget; ++t) {
      const std::vector<uint8_t> want = reference_mask(*c, st.state(), budget - t);
      bool first = false, second = false;
      const int64_t n = st.mask(budget - t, &mask, &first);
      ASSERT_EQ(mask, want) << "seed " << seed << " step " << t;
      ASSERT_EQ(n, std::count(want.begin(), want.end(), 1));
      EXPECT_EQ(st.mask(budget - t, &again, &second), n);
      EXPECT_TRUE(second) << "the second mask of a state comes from the cache";
      ASSERT_EQ(again, want);
      if (n == 0) break;
      std::vector<int32_t> allowed;
      for (size_t i = 0; i < mask.size(); ++i)
        if (mask[i]) allowed.push_back(static_cast<int32_t>(i));
      const int32_t id = allowed[rng() % allowed.size()];
      ASSERT_TRUE(st.accept(id).ok());
      if (c->vocab().control_symbol(id) == kSymEndOfMsg) break;
    }
  }
}

TEST(TokenConstraint, FastMaskEqualsTheTokenByTokenReference) {
  for (const char* schema : {
           R"({"type":"object","properties":{"name":{"type":"string","maxLength":6},
              "age":{"type":"integer","minimum":0,"maximum":150},
              "tags":{"type":"array","items":{"enum":["a","b"]},"maxItems":2}},
              "required":["name","age"],"additionalProperties":false})",
           R"({"type":"string","minLength":4,"maxLength":9})",
           R"({"type":"string","pattern":"^[a-z]+@[a-z]+$"})",
           R"({"type":"object","additionalProperties":{"type":"integer"}})",
           R"({"type":"array","items":{"type":"string","minLength":2},"minItems":1,"maxItems":3})",
           R"({"anyOf":[{"type":"number"},{"type":"string","maxLength":3},{"type":"null"}]})",
           R"({"type":"number","exclusiveMinimum":-2.5,"maximum":0.125})",
           R"({"type":"array","items":{"type":"number","minimum":12,"maximum":12}})",
       }) {
    SCOPED_TRACE(schema);
    expect_masks_match_reference(document(schema), 24);
  }
  {
    SCOPED_TRACE("json_object");
    auto g = json_document_grammar(nullptr);
    ASSERT_TRUE(g.ok());
    expect_masks_match_reference(Constraint::create(*g, test_vocab()), 24);
  }
  OutputSpec spec;
  spec.thinking = true;
  spec.tool_choice = OutputSpec::ToolChoice::kAuto;
  spec.tools.push_back({"get_weather", json::parse(R"({"type":"object","properties":{
      "city":{"type":"string","minLength":2,"maxLength":5},
      "days":{"type":"integer","minimum":1,"maximum":9},
      "temp":{"type":"number","exclusiveMinimum":-1,"maximum":0.5}},"required":["city"]})")});
  auto g = output_grammar(spec);
  ASSERT_TRUE(g.ok()) << g.status();
  SCOPED_TRACE("thinking + tools");
  expect_masks_match_reference(Constraint::create(*g, test_vocab()), 24);
}

TEST(TokenConstraint, ClosesATightBudgetExactly) {
  // {"a":1} is 7 bytes + end of message: 8 tokens at most, 5 with pieces.
  auto c = document(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})");
  for (uint64_t seed = 0; seed < 40; ++seed) {
    Walk w = random_walk(c, seed, 8);
    EXPECT_TRUE(w.ended) << seed << ": " << w.text;
  }
}

TEST(TokenConstraint, ABudgetTooSmallForAnyCompletionStillAllowsTokens) {
  // {"a":1} needs 8 symbols; with 3 tokens left nothing fits: unbounded mask.
  auto c = document(R"({"type":"object","properties":{"a":{"type":"integer"}},"required":["a"]})");
  ConstraintState st(c);
  std::vector<uint8_t> small, large;
  EXPECT_GT(st.mask(3, &small), 0);
  st.mask(1000, &large);
  EXPECT_EQ(small, large);
}

TEST(TokenConstraint, MasksAreCachedPerState) {
  auto c = document(R"({"type":"array","items":{"type":"boolean"}})");
  ConstraintState st(c);
  std::vector<uint8_t> m1, m2;
  st.mask(1000, &m1);
  const size_t after_first = c->cache_size();
  ConstraintState again(c);
  again.mask(1000, &m2);
  EXPECT_EQ(m1, m2);
  EXPECT_EQ(c->cache_size(), after_first);
  // Only '[' and tokens starting with it ("[]") may open the array.
  const VocabIndex& v = c->vocab();
  for (size_t id = 0; id < m1.size(); ++id)
    if (m1[id]) {
      EXPECT_EQ(v.bytes(static_cast<int32_t>(id))[0], '[');
    }
}

TEST(TokenConstraint, EndOfMessageOnlyWhereAccepted) {
  auto c = document(R"({"type":"integer"})");
  ConstraintState st(c);
  std::vector<uint8_t> mask;
  const int32_t eom = c->vocab().control_id(3);
  st.mask(100, &mask);
  EXPECT_FALSE(mask[static_cast<size_t>(eom)]);
  ASSERT_TRUE(st.accept('7').ok());
  st.mask(100, &mask);
  EXPECT_TRUE(mask[static_cast<size_t>(eom)]);
  EXPECT_FALSE(st.accept('x').ok());
}

TEST(TokenConstraint, ToolCallFormParsesToTypedArguments) {
  OutputSpec spec;
  spec.tool_choice = OutputSpec::ToolChoice::kRequired;
  spec.parallel_tool_calls = false;
  spec.tools.push_back({"get_weather", json::parse(R"({"type":"object","properties":{
      "city":{"type":"string","maxLength":5},"days":{"type":"integer","minimum":1,"maximum":9},
      "unit":{"enum":["c","f"]}},"required":["city","days"]})")});
  spec.tools.push_back({"noop", json::parse(R"({"type":"object"})")});
  auto g = output_grammar(spec);
  ASSERT_TRUE(g.ok()) << g.status();
  auto c = Constraint::create(*g, test_vocab());
  for (uint64_t seed = 0; seed < 40; ++seed) {
    Walk w = random_walk(c, seed, 160);
    ASSERT_TRUE(w.ended) << seed << ": " << w.text;
    chat::ParsedMessage m = chat::parse_output_text(w.text, /*thinking=*/false);
    ASSERT_EQ(m.tool_calls.size(), 1u) << w.text;
    const chat::ToolCall& call = m.tool_calls[0];
    if (call.name == "noop") {
      EXPECT_TRUE(call.arguments.empty() || call.arguments == "{}") << call.arguments;
      continue;
    }
    ASSERT_EQ(call.name, "get_weather");
    json args = json::parse(call.arguments, nullptr, false);
    ASSERT_TRUE(args.is_object()) << call.arguments;
    ASSERT_TRUE(args["city"].is_string()) << call.arguments;
    ASSERT_TRUE(args["days"].is_number_integer()) << call.arguments;
    EXPECT_GE(args["days"].get<int>(), 1);
    EXPECT_LE(args["days"].get<int>(), 9);
    if (args.contains("unit")) {
      EXPECT_TRUE(args["unit"] == "c" || args["unit"] == "f");
    }
  }
}

TEST(TokenConstraint, ThinkingThenJsonResponse) {
  OutputSpec spec;
  spec.thinking = true;
  spec.body = OutputSpec::Body::kJsonObject;
  auto g = output_grammar(spec);
  ASSERT_TRUE(g.ok()) << g.status();
  auto c = Constraint::create(*g, test_vocab());
  for (uint64_t seed = 0; seed < 20; ++seed) {
    Walk w = random_walk(c, seed, 60);
    ASSERT_TRUE(w.ended) << w.text;
    chat::ParsedMessage m = chat::parse_output_text(w.text, /*thinking=*/true);
    json v = json::parse(m.content, nullptr, false);
    EXPECT_TRUE(v.is_object()) << w.text;
    EXPECT_TRUE(m.tool_calls.empty());
  }
}

TEST(TokenConstraint, NamedAndNoneToolChoice) {
  OutputSpec spec;
  spec.tool_choice = OutputSpec::ToolChoice::kNamed;
  spec.named = "missing";
  spec.tools.push_back({"f", json::object()});
  EXPECT_FALSE(output_grammar(spec).ok());
  spec.named = "f";
  auto g = output_grammar(spec);
  ASSERT_TRUE(g.ok()) << g.status();
  spec.tool_choice = OutputSpec::ToolChoice::kNone;
  auto none = output_grammar(spec);
  ASSERT_TRUE(none.ok());
  auto c = Constraint::create(*none, test_vocab());
  for (uint64_t seed = 0; seed < 10; ++seed) {
    Walk w = random_walk(c, seed, 40);
    ASSERT_TRUE(w.ended);
    EXPECT_EQ(w.text.find("<|open|>tools"), std::string::npos) << w.text;
  }
}

}  // namespace
}  // namespace k3::grammar
