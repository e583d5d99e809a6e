// Constrained decoding in engined's loop on the tiny random-weights model:
// whatever the seed, a reply under a schema parses and conforms, ends with
// the end of message where the grammar accepts, and fits a tight max_tokens.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "engined/serving/constraint_compiler.h"
#include "engined/serving/engine_loop.h"
#include "shared/chat/xtml_tokens.h"
#include "tests/engined/serving/loop_util.h"

namespace k3::engined {
namespace {

namespace v1 = k3serve::v1;
using nlohmann::json;

std::unique_ptr<EngineLoop> make_loop() {
  return testing::make_loop(/*sessions=*/2);
}

using Reply = testing::LoopReply;

Reply run(EngineLoop& loop, ServeRequest r) {
  return testing::run_to_end(loop, std::move(r));
}

const char* kSchema = R"({"type":"object","properties":{
    "name":{"type":"string","maxLength":8},
    "age":{"type":"integer","minimum":0,"maximum":120},
    "pet":{"enum":["cat","dog",null]},
    "tags":{"type":"array","items":{"type":"boolean"},"maxItems":3}},
    "required":["name","age"],"additionalProperties":false})";

void expect_conforms(const json& v, const std::string& text) {
  ASSERT_TRUE(v.is_object()) << text;
  ASSERT_TRUE(v.contains("name") && v["name"].is_string()) << text;
  ASSERT_TRUE(v.contains("age") && v["age"].is_number_integer()) << text;
  EXPECT_GE(v["age"].get<int64_t>(), 0) << text;
  EXPECT_LE(v["age"].get<int64_t>(), 120) << text;
  for (auto it = v.begin(); it != v.end(); ++it) {
    const std::string& k = it.key();
    EXPECT_TRUE(k == "name" || k == "age" || k == "pet" || k == "tags") << text;
    if (k == "pet") EXPECT_TRUE(*it == "cat" || *it == "dog" || it->is_null()) << text;
    if (k == "tags") EXPECT_TRUE(it->is_array() && it->size() <= 3) << text;
  }
}

TEST(ConstrainedServing, RepliesUnderASchemaAlwaysConform) {
  auto constraints = ConstraintCompiler::load(testing::tiny_model_dir());
  v1::OutputConstraint c;
  c.set_body(v1::OutputConstraint::JSON_SCHEMA);
  c.set_json_schema(kSchema);
  auto compiled = constraints->compile(c);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto tok = tokenizer::Tokenizer::load(testing::tiny_model_dir());
  ASSERT_TRUE(tok.ok());
  auto loop = make_loop();
  for (uint64_t seed = 1; seed <= 12; ++seed) {
    ServeRequest r;
    r.request_id = cat("seed-", seed);
    r.prompt = {5, 17, 300, 42};
    r.max_tokens = seed % 2 ? 40 : 200;  // tight budgets close in time
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    r.constraint = *compiled;
    Reply reply = run(*loop, r);
    ASSERT_EQ(reply.end.kind, ServeEvent::Kind::kFinished) << reply.end.status;
    EXPECT_EQ(reply.end.reason, StopReason::kStop) << "seed " << seed;
    auto parsed = chat::parse_output_ids(*tok, reply.tokens, /*thinking=*/false);
    ASSERT_TRUE(parsed.ok()) << parsed.status();
    EXPECT_TRUE(parsed->ended);
    json v = json::parse(parsed->content, nullptr, /*allow_exceptions=*/false);
    ASSERT_FALSE(v.is_discarded()) << "seed " << seed << ": " << parsed->content;
    expect_conforms(v, parsed->content);
  }
}

TEST(ConstrainedServing, ForcedToolCallHasTypedArguments) {
  auto constraints = ConstraintCompiler::load(testing::tiny_model_dir());
  v1::OutputConstraint c;
  c.set_tool_choice(v1::OutputConstraint::TOOL_CHOICE_NAMED);
  c.set_named_tool("lookup");
  c.set_single_tool_call(true);
  auto* t = c.add_tools();
  t->set_name("lookup");
  t->set_parameters_json(
      R"({"type":"object","properties":{"q":{"type":"string","maxLength":6},
          "n":{"type":"integer","minimum":1,"maximum":5}},"required":["q","n"]})");
  c.add_tools()->set_name("other");
  auto compiled = constraints->compile(c);
  ASSERT_TRUE(compiled.ok()) << compiled.status();
  auto tok = tokenizer::Tokenizer::load(testing::tiny_model_dir());
  auto loop = make_loop();
  for (uint64_t seed = 1; seed <= 6; ++seed) {
    ServeRequest r;
    r.request_id = "tool";
    r.prompt = {7, 8, 9};
    r.max_tokens = 400;  // closing in time counts one byte per token: markup is long
    r.sampling.temperature = 1.0f;
    r.sampling.seed = seed;
    r.constraint = *compiled;
    Reply reply = run(*loop, r);
    ASSERT_EQ(reply.end.kind, ServeEvent::Kind::kFinished) << reply.end.status;
    auto parsed = chat::parse_output_ids(*tok, reply.tokens, /*thinking=*/false);
    ASSERT_TRUE(parsed.ok());
    ASSERT_EQ(parsed->tool_calls.size(), 1u);
    EXPECT_EQ(parsed->tool_calls[0].name, "lookup");
    json args = json::parse(parsed->tool_calls[0].arguments, nullptr, false);
    ASSERT_TRUE(args.is_object()) << parsed->tool_calls[0].arguments;
    EXPECT_TRUE(args["q"].is_string());
    ASSERT_TRUE(args["n"].is_number_integer());
    EXPECT_GE(args["n"].get<int>(), 1);
    EXPECT_LE(args["n"].get<int>(), 5);
  }
}

TEST(ConstrainedServing, UnsupportedKeywordIsRefusedNamingIt) {
  auto constraints = ConstraintCompiler::load(testing::tiny_model_dir());
  v1::OutputConstraint c;
  c.set_body(v1::OutputConstraint::JSON_SCHEMA);
  c.set_json_schema(R"({"type":"object","patternProperties":{"a":{}}})");
  auto compiled = constraints->compile(c);
  ASSERT_FALSE(compiled.ok());
  EXPECT_EQ(compiled.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(compiled.status().message().find("'patternProperties'"), std::string::npos);
}

}  // namespace
}  // namespace k3::engined
