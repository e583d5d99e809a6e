// The Messages API's request conversion into the chat call, and its
// response, usage and error bodies (gateway/http/messages_protocol.h).
#include "gateway/http/messages_protocol.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "gateway/core/status_codes.h"
#include "tests/test_util.h"

namespace k3::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

MessagesCall parse_ok(const json& body, MessagesEndpoint endpoint = MessagesEndpoint::kCreate) {
  auto r = parse_messages_request(body.dump(), endpoint);
  EXPECT_TRUE(r.ok()) << r.status() << "\n" << body.dump();
  return r.ok() ? *r : MessagesCall{};
}

// The refusal's message; its param must be `param` when given.
std::string refused(const json& body, const std::string& param = "",
                    MessagesEndpoint endpoint = MessagesEndpoint::kCreate) {
  auto r = parse_messages_request(body.dump(), endpoint);
  EXPECT_FALSE(r.ok()) << body.dump();
  if (r.ok()) return "";
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  if (!param.empty()) {
    EXPECT_EQ(error_param(r.status()), param) << msg(r.status());
  }
  return msg(r.status());
}

json base() {
  return {{"model", "tiny"},
          {"max_tokens", 64},
          {"messages", {{{"role", "user"}, {"content", "Hello"}}}}};
}

TEST(MessagesProtocol, ASimpleRequestBecomesTheChatCall) {
  json b = base();
  b["system"] = "Be brief.";
  b["temperature"] = 0.5;
  b["top_p"] = 0.9;
  b["top_k"] = 20;
  b["stop_sequences"] = {"END"};
  b["stream"] = true;
  b["metadata"] = {{"user_id", "u1"}};
  b["seed"] = 7;
  const MessagesCall c = parse_ok(b);
  EXPECT_EQ(c.chat.model, "tiny");
  EXPECT_EQ(c.chat.max_tokens, 64);
  EXPECT_TRUE(c.chat.stream);
  EXPECT_EQ(c.chat.stop, std::vector<std::string>{"END"});
  EXPECT_FLOAT_EQ(*c.chat.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(*c.chat.sampling.top_p, 0.9f);
  EXPECT_EQ(*c.chat.sampling.top_k, 20);
  EXPECT_EQ(*c.chat.sampling.seed, 7u);
  const ordered_json expected = ordered_json::parse(R"([
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "Hello"}])");
  EXPECT_EQ(c.chat.render["messages"], expected);
  // Thinking is off unless enabled.
  EXPECT_EQ(c.chat.render["thinking"], false);
  EXPECT_FALSE(c.chat.render.contains("thinking_effort"));
}

TEST(MessagesProtocol, BlocksBecomeChatMessages) {
  json b = base();
  b["system"] = {{{"type", "text"}, {"text", "A"}, {"cache_control", {{"type", "ephemeral"}}}},
                 {{"type", "text"}, {"text", "B"}}};
  b["messages"] = json::parse(R"([
    {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
    {"role": "assistant", "content": [
      {"type": "thinking", "thinking": "need a tool", "signature": "sig"},
      {"type": "text", "text": "Let me check."},
      {"type": "tool_use", "id": "toolu_1", "name": "get_weather", "input": {"city": "Paris"}}]},
    {"role": "user", "content": [
      {"type": "tool_result", "tool_use_id": "toolu_1", "content": [{"type": "text", "text": "sunny"}]},
      {"type": "tool_result", "tool_use_id": "toolu_2", "content": "oops", "is_error": true},
      {"type": "text", "text": "Thanks"}]}])");
  const MessagesCall c = parse_ok(b);
  const ordered_json expected = ordered_json::parse(R"([
    {"role": "system", "content": "A\nB"},
    {"role": "user", "content": [{"type": "text", "text": "Weather?"}]},
    {"role": "assistant", "content": "Let me check.", "reasoning_content": "need a tool",
     "tool_calls": [{"id": "toolu_1", "type": "function",
                     "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
    {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
    {"role": "tool", "tool_call_id": "toolu_2", "content": "oops"},
    {"role": "user", "content": [{"type": "text", "text": "Thanks"}]}])");
  EXPECT_EQ(c.chat.render["messages"], expected) << c.chat.render["messages"].dump(1);
}

TEST(MessagesProtocol, ToolsAndToolChoiceMapToTheChatRoutes) {
  json b = base();
  b["tools"] = json::parse(R"([{"name": "f", "description": "d",
    "input_schema": {"type": "object", "properties": {"x": {"type": "string"}}},
    "cache_control": {"type": "ephemeral"}}])");
  const ordered_json tools = ordered_json::parse(R"([{"type": "function", "function":
    {"name": "f", "description": "d",
     "parameters": {"properties": {"x": {"type": "string"}}, "type": "object"}}}])");
  struct Case {
    json choice;
    ordered_json expected;
    bool parallel;
  };
  const std::vector<Case> cases = {
      {{{"type", "auto"}}, "auto", true},
      {{{"type", "any"}}, "required", true},
      {{{"type", "none"}}, "none", true},
      {{{"type", "tool"}, {"name", "f"}, {"disable_parallel_tool_use", true}},
       ordered_json::parse(R"({"type": "function", "function": {"name": "f"}})"),
       false},
  };
  for (const Case& k : cases) {
    b["tool_choice"] = k.choice;
    const MessagesCall c = parse_ok(b);
    EXPECT_EQ(c.chat.render["tools"], tools);
    EXPECT_EQ(c.chat.render["tool_choice"], k.expected) << k.choice.dump();
    EXPECT_EQ(c.chat.parallel_tool_calls, k.parallel) << k.choice.dump();
  }
}

TEST(MessagesProtocol, ThinkingAndEffortFollowTheTable) {
  json b = base();
  b["max_tokens"] = 100000;
  struct Case {
    json thinking;
    json output_config;
    bool on;
    std::string effort;
  };
  const std::vector<Case> cases = {
      {{{"type", "disabled"}}, nullptr, false, ""},
      {{{"type", "enabled"}, {"budget_tokens", 1024}}, nullptr, true, "low"},
      {{{"type", "enabled"}, {"budget_tokens", 2048}}, nullptr, true, "low"},
      {{{"type", "enabled"}, {"budget_tokens", 2049}}, nullptr, true, "high"},
      {{{"type", "enabled"}, {"budget_tokens", 16384}}, nullptr, true, "high"},
      {{{"type", "enabled"}, {"budget_tokens", 16385}}, nullptr, true, "max"},
      {{{"type", "adaptive"}}, nullptr, true, ""},
      {{{"type", "enabled"}, {"budget_tokens", 1024}}, {{"effort", "medium"}}, true, "high"},
      {{{"type", "enabled"}, {"budget_tokens", 1024}}, {{"effort", "xhigh"}}, true, "max"},
      {{{"type", "enabled"}, {"budget_tokens", 50000}}, {{"effort", "minimal"}}, true, "low"},
      {{{"type", "enabled"}, {"budget_tokens", 1024}}, {{"effort", "none"}}, false, ""},
      {nullptr, {{"effort", "max"}}, false, ""},
  };
  for (const Case& k : cases) {
    b["thinking"] = k.thinking;
    b["output_config"] = k.output_config;
    const MessagesCall c = parse_ok(b);
    EXPECT_EQ(c.chat.render["thinking"], k.on) << k.thinking << k.output_config;
    if (k.effort.empty()) {
      EXPECT_FALSE(c.chat.render.contains("thinking_effort")) << k.thinking << k.output_config;
    } else {
      EXPECT_EQ(c.chat.render["thinking_effort"], k.effort) << k.thinking << k.output_config;
    }
  }
  b["thinking"] = {{"type", "enabled"}, {"budget_tokens", 3000}};
  b["output_config"] = nullptr;
  EXPECT_EQ(parse_ok(b).chat.thinking_budget, 3000);
}

// budget_tokens is at least 1 (not Anthropic's 1024: budgets of a few
// hundred tokens make sense at seconds per token) and below max_tokens (a
// 400 naming the field); the budget is the core request's, which engined
// enforces.
TEST(MessagesProtocol, BudgetTokensIsPositiveAndBelowMaxTokens) {
  json b = base();
  b["max_tokens"] = 2000;
  b["thinking"] = {{"type", "enabled"}, {"budget_tokens", 1024}};
  EXPECT_EQ(parse_ok(b).chat.thinking_budget, 1024);
  b["thinking"]["budget_tokens"] = 1999;
  EXPECT_EQ(parse_ok(b).chat.thinking_budget, 1999);
  b["thinking"]["budget_tokens"] = 64;
  EXPECT_EQ(parse_ok(b).chat.thinking_budget, 64);
  b["thinking"]["budget_tokens"] = 0;
  EXPECT_NE(refused(b, "thinking.budget_tokens").find("at least 1"), std::string::npos);
  b["thinking"]["budget_tokens"] = 2000;
  EXPECT_NE(refused(b, "thinking.budget_tokens").find("less than 'max_tokens'"), std::string::npos);
  b["thinking"]["budget_tokens"] = 1500.5;
  refused(b, "thinking.budget_tokens");
  // Disabled: no budget.
  b["thinking"] = {{"type", "disabled"}};
  EXPECT_EQ(parse_ok(b).chat.thinking_budget, 0);
  // count_tokens has no max_tokens, but the minimum holds.
  b.erase("max_tokens");
  b["thinking"] = {{"type", "enabled"}, {"budget_tokens", 0}};
  refused(b, "thinking.budget_tokens", MessagesEndpoint::kCountTokens);
}

TEST(MessagesProtocol, OutputFormatBecomesAJsonSchemaResponseFormat) {
  json b = base();
  b["output_config"] = {{"format", {{"type", "json_schema"}, {"schema", {{"type", "object"}}}}}};
  const MessagesCall c = parse_ok(b);
  EXPECT_EQ(c.chat.render["response_format"],
            ordered_json::parse(
                R"({"type": "json_schema", "json_schema": {"schema": {"type": "object"}}})"));
}

TEST(MessagesProtocol, RefusalsNameTheField) {
  json b = base();
  b.erase("max_tokens");
  EXPECT_NE(refused(b, "max_tokens").find("'max_tokens' is required"), std::string::npos);
  b = base();
  b.erase("model");
  refused(b, "model");
  b = base();
  b["frequency_penalty"] = 1;
  EXPECT_NE(refused(b, "frequency_penalty").find("not a supported field"), std::string::npos);
  b = base();
  b["temperature"] = 1.5;
  refused(b, "temperature");
  b = base();
  b["mcp_servers"] = json::array({json::object()});
  refused(b, "mcp_servers");
  b = base();
  b["messages"] = {{{"role", "system"}, {"content", "x"}}};
  refused(b, "messages[0].role");
  b = base();
  b["messages"] = {{{"role", "user"}, {"content", {{{"type", "image"}, {"source", {}}}}}}};
  refused(b, "messages[0].content[0].type");
  b = base();
  b["messages"] = {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "x"}, {"y", 1}}}}}};
  refused(b, "messages[0].content[0].y");
  b = base();
  b["tools"] = {{{"type", "web_search_20250305"}, {"name", "web_search"}}};
  refused(b, "tools[0].type");
  b = base();
  b["tools"] = {{{"name", "f"}}};
  refused(b, "tools[0].input_schema");
  b = base();
  b["tool_choice"] = {{"type", "tool"}};
  refused(b, "tool_choice.name");
  b = base();
  b["thinking"] = {{"type", "enabled"}, {"budget_tokens", 64}};
  refused(b, "thinking.budget_tokens");  // not below max_tokens
  b = base();
  b["thinking"] = {{"type", "enabled"}};
  refused(b, "thinking.budget_tokens");
  b = base();
  b["output_config"] = {{"effort", "extreme"}};
  EXPECT_NE(
      refused(b, "output_config.effort").find("none, minimal, low, medium, high, xhigh or max"),
      std::string::npos);
  b = base();
  b["stop_sequences"] = {"a", "b", "c", "d", "e"};
  refused(b, "stop_sequences");
  b = base();
  b["messages"] = json::array();
  refused(b, "messages");
}

TEST(MessagesProtocol, CountTokensTakesNoGenerationFields) {
  json b = base();
  b.erase("max_tokens");
  b["thinking"] = {{"type", "enabled"}, {"budget_tokens", 2000}};
  const MessagesCall c = parse_ok(b, MessagesEndpoint::kCountTokens);
  EXPECT_EQ(c.chat.render["thinking"], true);
  b["max_tokens"] = 10;
  refused(b, "max_tokens", MessagesEndpoint::kCountTokens);
}

TEST(MessagesProtocol, TheResponseHasThinkingTextAndToolUseBlocks) {
  ChoiceResult choice;
  choice.message.reasoning_content = "hmm";
  choice.message.content = "Checking.";
  choice.message.tool_calls = {{"call_1", "get_weather", R"({"city":"Paris"})"},
                               {"call_2", "cut", R"({"x":)"}};
  choice.reason = FinishReason::kToolCalls;
  Usage u;
  u.prompt_tokens = 100;
  u.cached_tokens = 60;
  u.completion_tokens = 9;
  const json j = messages_response_json("msg_1", "tiny", choice, std::nullopt, u);
  EXPECT_EQ(j, json::parse(R"({
    "id": "msg_1", "type": "message", "role": "assistant", "model": "tiny",
    "content": [
      {"type": "thinking", "thinking": "hmm", "signature": ""},
      {"type": "text", "text": "Checking."},
      {"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"city": "Paris"}},
      {"type": "tool_use", "id": "call_2", "name": "cut", "input": {}}],
    "stop_reason": "tool_use", "stop_sequence": null,
    "usage": {"input_tokens": 40, "output_tokens": 9, "cache_creation_input_tokens": 0,
              "cache_read_input_tokens": 60}})"))
      << j.dump(1);
}

TEST(MessagesProtocol, StopReasons) {
  EXPECT_STREQ(messages_stop_reason(FinishReason::kStop, false), "end_turn");
  EXPECT_STREQ(messages_stop_reason(FinishReason::kStop, true), "stop_sequence");
  EXPECT_STREQ(messages_stop_reason(FinishReason::kLength, false), "max_tokens");
  EXPECT_STREQ(messages_stop_reason(FinishReason::kToolCalls, false), "tool_use");
  ChoiceResult cut;
  cut.message.reasoning_content = "thinking until the limit";
  cut.reason = FinishReason::kLength;
  const json j = messages_response_json("m", "tiny", cut, std::nullopt, {});
  EXPECT_EQ(j["stop_reason"], "max_tokens");
  ASSERT_EQ(j["content"].size(), 1u);
  EXPECT_EQ(j["content"][0]["type"], "thinking");
  ChoiceResult stopped;
  stopped.message.content = "a";
  const json s = messages_response_json("m", "tiny", stopped, std::string("END"), {});
  EXPECT_EQ(s["stop_reason"], "stop_sequence");
  EXPECT_EQ(s["stop_sequence"], "END");
}

TEST(MessagesProtocol, ErrorsTakeAnthropicsShape) {
  EXPECT_EQ(messages_error_json(absl::InvalidArgumentError("bad")), json::parse(R"({"type": "error",
              "error": {"type": "invalid_request_error", "message": "bad"}})"));
  EXPECT_EQ(messages_error_json(absl::UnauthenticatedError("k"))["error"]["type"],
            "authentication_error");
  EXPECT_EQ(messages_error_json(absl::NotFoundError("m"))["error"]["type"], "not_found_error");
  EXPECT_EQ(messages_error_json(absl::UnavailableError("busy"))["error"]["type"],
            "overloaded_error");
  EXPECT_EQ(messages_error_json(absl::ResourceExhaustedError("q"))["error"]["type"],
            "rate_limit_error");
  EXPECT_EQ(messages_error_json(absl::InternalError("x"))["error"]["type"], "api_error");
  const HttpResponse r = messages_error_response(absl::UnauthenticatedError("no key"));
  EXPECT_EQ(r.status, 401);
  EXPECT_EQ(json::parse(r.body)["error"]["message"], "no key");
}

// docs/messages-api.md's table of POST /v1/messages names exactly the
// fields the parser takes (a nested row, `output_config.effort`, names its
// top-level field).
TEST(MessagesProtocol, TheDocListsEveryField) {
  std::istringstream in(testing::read_file(testing::source_dir() + "/docs/messages-api.md"));
  std::set<std::string> documented;
  bool in_section = false;
  for (std::string line; std::getline(in, line);) {
    if (line.rfind("## ", 0) == 0 || line.rfind("### ", 0) == 0)
      in_section = line == "## POST /v1/messages";
    if (!in_section || line.rfind("| `", 0) != 0) continue;
    const std::string cell = line.substr(2, line.find(" |", 2) - 2);
    for (size_t pos = 0; (pos = cell.find('`', pos)) != std::string::npos;) {
      const size_t end = cell.find('`', pos + 1);
      const std::string name = cell.substr(pos + 1, end - pos - 1);
      documented.insert(name.substr(0, name.find('.')));
      pos = end + 1;
    }
  }
  const auto& fields = messages_request_fields(MessagesEndpoint::kCreate);
  EXPECT_EQ(documented, std::set<std::string>(fields.begin(), fields.end()));
}

}  // namespace
}  // namespace k3::gateway
