// The gateway's output constraint from a chat request: what is enforced,
// and the 400s (malformed tools, undefined function, unsupported keyword).
#include <gtest/gtest.h>

#include "gateway/core/output_form_request.h"

namespace k3::gateway {
namespace {

namespace v1 = k3serve::v1;
using nlohmann::ordered_json;

ordered_json weather_tools() {
  return ordered_json::parse(R"([{"type":"function","function":{"name":"get_weather",
      "parameters":{"type":"object","properties":{"city":{"type":"string"}},"required":["city"]}}}])");
}

TEST(OutputConstraint, NothingToEnforce) {
  auto c = output_constraint(ordered_json::object(), true, true);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->has_value());
  ordered_json r = {{"tools", weather_tools()}, {"tool_choice", "auto"}};
  c = output_constraint(r, true, true);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->has_value());
}

// A think budget is enforced by engined: with nothing else to enforce the
// constraint holds the think channel only (no tools, whose schemas may use
// keywords the grammar refuses); with a schema or a required tool it rides
// along; without thinking there is no channel to limit.
TEST(OutputConstraint, ThinkBudget) {
  ordered_json r = {{"tools", weather_tools()}, {"tool_choice", "auto"}};
  r["tools"][0]["function"]["parameters"]["properties"]["city"]["format"] = "uri";
  auto c = output_constraint(r, true, true, 1024);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->has_value());
  EXPECT_TRUE((*c)->thinking());
  EXPECT_EQ((*c)->think_budget_tokens(), 1024u);
  EXPECT_EQ((*c)->body(), v1::OutputConstraint::TEXT);
  EXPECT_EQ((*c)->tool_choice(), v1::OutputConstraint::TOOL_CHOICE_AUTO);
  EXPECT_FALSE((*c)->single_tool_call());
  EXPECT_EQ((*c)->tools_size(), 0);

  c = output_constraint(ordered_json::object(), false, true, 1024);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->has_value());

  r = {{"tools", weather_tools()}, {"tool_choice", "required"}};
  c = output_constraint(r, true, true, 2000);
  ASSERT_TRUE(c.ok() && c->has_value()) << c.status();
  EXPECT_EQ((*c)->tool_choice(), v1::OutputConstraint::TOOL_CHOICE_REQUIRED);
  EXPECT_EQ((*c)->think_budget_tokens(), 2000u);
  c = output_constraint(r, false, true, 2000);
  ASSERT_TRUE(c.ok() && c->has_value()) << c.status();
  EXPECT_EQ((*c)->think_budget_tokens(), 0u);
}

TEST(OutputConstraint, ResponseFormats) {
  ordered_json r = {{"response_format", {{"type", "json_object"}}}};
  auto c = output_constraint(r, false, true);
  ASSERT_TRUE(c.ok() && c->has_value());
  EXPECT_EQ((*c)->body(), v1::OutputConstraint::JSON_OBJECT);
  EXPECT_FALSE((*c)->thinking());
  r["response_format"] = ordered_json::parse(
      R"({"type":"json_schema","json_schema":{"name":"x","strict":true,"schema":{"type":"integer"}}})");
  c = output_constraint(r, true, true);
  ASSERT_TRUE(c.ok() && c->has_value()) << c.status();
  EXPECT_EQ((*c)->body(), v1::OutputConstraint::JSON_SCHEMA);
  EXPECT_EQ((*c)->json_schema(), R"({"type":"integer"})");
  EXPECT_TRUE((*c)->thinking());
  // engined gets the schema in the client's key order: a const object is
  // written as declared.
  r["response_format"] = ordered_json::parse(
      R"({"type":"json_schema","json_schema":{"name":"x","schema":{"const":{"b":1,"a":2}}}})");
  c = output_constraint(r, false, true);
  ASSERT_TRUE(c.ok() && c->has_value()) << c.status();
  EXPECT_EQ((*c)->json_schema(), R"({"const":{"b":1,"a":2}})");
  ordered_json t = {{"tools", ordered_json::parse(R"([{"type":"function","function":{"name":"f",
      "parameters":{"type":"object","properties":{"z":{"const":{"y":1,"x":2}}}}}}])")},
                    {"tool_choice", "required"}};
  c = output_constraint(t, false, true);
  ASSERT_TRUE(c.ok() && c->has_value()) << c.status();
  EXPECT_EQ((*c)->tools(0).parameters_json(),
            R"({"type":"object","properties":{"z":{"const":{"y":1,"x":2}}}})");
}

TEST(OutputConstraint, UnsupportedKeywordIsA400NamingIt) {
  ordered_json r = {
      {"response_format",
       ordered_json::parse(
           R"({"type":"json_schema","json_schema":{"schema":{"type":"string","format":"date"}}})")}};
  auto c = output_constraint(r, false, true);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(c.status().message().find("'format'"), std::string::npos) << c.status();
  ordered_json tools = weather_tools();
  tools[0]["function"]["parameters"]["properties"]["city"]["format"] = "x";
  c = output_constraint({{"tools", tools}, {"tool_choice", "required"}}, false, true);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'format'"), std::string::npos) << c.status();
}

TEST(OutputConstraint, ToolChoices) {
  ordered_json r = {{"tools", weather_tools()}, {"tool_choice", "required"}};
  auto c = output_constraint(r, false, false);
  ASSERT_TRUE(c.ok() && c->has_value()) << c.status();
  EXPECT_EQ((*c)->tool_choice(), v1::OutputConstraint::TOOL_CHOICE_REQUIRED);
  EXPECT_TRUE((*c)->single_tool_call());
  ASSERT_EQ((*c)->tools_size(), 1);
  EXPECT_EQ((*c)->tools(0).name(), "get_weather");
  r["tool_choice"] =
      ordered_json::parse(R"({"type":"function","function":{"name":"get_weather"}})");
  c = output_constraint(r, false, true);
  ASSERT_TRUE(c.ok() && c->has_value());
  EXPECT_EQ((*c)->tool_choice(), v1::OutputConstraint::TOOL_CHOICE_NAMED);
  EXPECT_EQ((*c)->named_tool(), "get_weather");
  r["tool_choice"] = "none";
  c = output_constraint(r, false, true);
  ASSERT_TRUE(c.ok() && c->has_value());
  EXPECT_EQ((*c)->tool_choice(), v1::OutputConstraint::TOOL_CHOICE_NONE);
  r["tool_choice"] = "auto";  // auto, one call at most: enforced
  c = output_constraint(r, false, false);
  ASSERT_TRUE(c.ok() && c->has_value());
  EXPECT_EQ((*c)->tool_choice(), v1::OutputConstraint::TOOL_CHOICE_AUTO);
}

TEST(OutputConstraint, BadToolsAndNamesAre400s) {
  for (const char* tools :
       {R"([1])", R"([{"type":"function"}])", R"([{"type":"function","function":{"name":""}}])",
        R"([{"type":"retrieval","function":{"name":"f"}}])",
        R"([{"function":{"name":"f","parameters":3}}])",
        R"([{"function":{"name":"f"}},{"function":{"name":"f"}}])"}) {
    auto c = output_constraint({{"tools", ordered_json::parse(tools)}}, false, true);
    EXPECT_FALSE(c.ok()) << tools;
    EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument) << tools;
  }
  ordered_json r = {
      {"tools", weather_tools()},
      {"tool_choice", ordered_json::parse(R"({"type":"function","function":{"name":"nope"}})")}};
  auto c = output_constraint(r, false, true);
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("'nope'"), std::string::npos);
  c = output_constraint({{"tool_choice", "required"}}, false, true);
  EXPECT_FALSE(c.ok());
}

}  // namespace
}  // namespace k3::gateway
