// gateway/http/responses_protocol.h: a Responses body becomes the chat
// request an equivalent chat completion would be (the same render fields,
// hence the same prompt), each refusal names its field, and the response
// object and usage have OpenAI's shape.
#include "gateway/http/responses_protocol.h"

#include <set>
#include <sstream>
#include <string>

#include "gateway/core/status_codes.h"
#include "gtest/gtest.h"
#include "shared/chat/xtml_render.h"
#include "tests/gateway/http/protocol_test_support.h"
#include "tests/test_util.h"

namespace k3::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

std::string responses_error(std::string_view body) {
  return refusal([](std::string_view b) { return parse_responses_request(b); }, body);
}

ResponsesCall parsed(std::string_view body) {
  StatusOr<ResponsesCall> r = parse_responses_request(body);
  EXPECT_TRUE(r.ok()) << r.status() << " for " << body;
  return r.ok() ? *r : ResponsesCall{};
}

// The prompt both requests render to must be the same text.
void expect_same_prompt(std::string_view responses_body, std::string_view chat_body) {
  const ResponsesCall r = parsed(responses_body);
  StatusOr<ChatCall> c = parse_chat_request(chat_body);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(r.chat.render.dump(), c->render.dump());
  auto a = chat::render_chat(r.chat.render);
  auto b = chat::render_chat(c->render);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_EQ(a->size(), b->size());
  for (size_t i = 0; i < a->size(); ++i) EXPECT_EQ((*a)[i].text, (*b)[i].text) << i;
}

TEST(ParseResponses, StringInputIsOneUserMessage) {
  const ResponsesCall r = parsed(R"({"model":"m","input":"hi"})");
  EXPECT_EQ(r.chat.model, "m");
  EXPECT_EQ(r.chat.render["messages"], ordered_json::parse(R"([{"role":"user","content":"hi"}])"));
  EXPECT_EQ(r.chat.max_tokens, 0);
  EXPECT_FALSE(r.chat.stream);
  EXPECT_EQ(r.chat.n, 1);
  EXPECT_EQ(r.echo["instructions"], nullptr);
  EXPECT_EQ(r.echo["tools"], json::array());
  EXPECT_EQ(r.echo["tool_choice"], "auto");
  EXPECT_EQ(r.echo["store"], false);
  EXPECT_EQ(r.echo["text"], json::parse(R"({"format":{"type":"text"}})"));
}

TEST(ParseResponses, InstructionsAreTheSystemMessage) {
  expect_same_prompt(R"({"instructions":"be brief","input":"hi"})",
                     R"({"messages":[{"role":"system","content":"be brief"},
                                     {"role":"user","content":"hi"}]})");
}

TEST(ParseResponses, ItemsRenderAsTheChatHistory) {
  // A tool round trip as the Agents SDK sends it back: the user message,
  // the model's reasoning and call, the call's output.
  expect_same_prompt(
      R"({"input":[
        {"role":"user","content":[{"type":"input_text","text":"weather?"}]},
        {"type":"reasoning","id":"rs_1","summary":[],"content":[{"type":"reasoning_text","text":"call it"}],"status":"completed"},
        {"type":"function_call","id":"fc_1","call_id":"call_1","name":"get_weather","arguments":"{\"city\":\"Paris\"}","status":"completed"},
        {"type":"function_call_output","call_id":"call_1","output":"sunny"},
        {"type":"message","role":"assistant","id":"msg_1","status":"completed",
         "content":[{"type":"output_text","text":"It is sunny.","annotations":[],"logprobs":[]}]},
        {"type":"message","role":"user","content":"thanks"}],
        "tools":[{"type":"function","name":"get_weather","description":"d",
                  "parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true}]})",
      R"({"messages":[
        {"role":"user","content":[{"type":"text","text":"weather?"}]},
        {"role":"assistant","content":[],"reasoning_content":"call it","tool_calls":[
          {"id":"call_1","type":"function","function":{"name":"get_weather","arguments":"{\"city\":\"Paris\"}"}}]},
        {"role":"tool","tool_call_id":"call_1","name":"get_weather","content":"sunny"},
        {"role":"assistant","content":[{"type":"text","text":"It is sunny."}]},
        {"role":"user","content":"thanks"}],
        "tools":[{"type":"function","function":{"name":"get_weather","description":"d",
                  "parameters":{"type":"object","properties":{"city":{"type":"string"}}},"strict":true}}]})");
}

TEST(ParseResponses, ConsecutiveCallsJoinOneAssistantTurn) {
  const ResponsesCall r = parsed(R"({"input":[
      {"role":"user","content":"go"},
      {"type":"function_call","call_id":"a","name":"f","arguments":"{}"},
      {"type":"function_call","call_id":"b","name":"g","arguments":"{}"},
      {"type":"function_call_output","call_id":"b","output":"2"},
      {"type":"function_call_output","call_id":"a","output":[{"type":"input_text","text":"1"}]}]})");
  const ordered_json& m = r.chat.render["messages"];
  ASSERT_EQ(m.size(), 4u);
  EXPECT_EQ(m[1]["tool_calls"].size(), 2u);
  EXPECT_EQ(m[2]["name"], "g");
  EXPECT_EQ(m[3]["name"], "f");
  EXPECT_EQ(m[3]["content"], ordered_json::parse(R"([{"type":"text","text":"1"}])"));
  // The renderer accepts it (tool results placed by call id).
  EXPECT_TRUE(chat::render_chat(r.chat.render).ok());
}

TEST(ParseResponses, ToolsChoiceFormatAndEffortMapToChat) {
  expect_same_prompt(
      R"({"input":"x","tools":[{"type":"function","name":"f","parameters":{"type":"object"}}],
          "tool_choice":{"type":"function","name":"f"},"parallel_tool_calls":false,
          "reasoning":{"effort":"medium","summary":"auto"}})",
      R"({"messages":[{"role":"user","content":"x"}],
          "tools":[{"type":"function","function":{"name":"f","parameters":{"type":"object"}}}],
          "tool_choice":{"type":"function","function":{"name":"f"}},
          "reasoning_effort":"high"})");
  expect_same_prompt(
      R"({"input":"x","text":{"format":{"type":"json_schema","name":"p","strict":true,
          "schema":{"type":"object","properties":{"a":{"type":"integer"}}}}}})",
      R"({"messages":[{"role":"user","content":"x"}],"response_format":{"type":"json_schema",
          "json_schema":{"schema":{"type":"object","properties":{"a":{"type":"integer"}}},
          "name":"p","strict":true}}})");
  expect_same_prompt(R"({"input":"x","text":{"format":{"type":"json_object"}}})",
                     R"({"messages":[{"role":"user","content":"x"}],
                         "response_format":{"type":"json_object"}})");
  expect_same_prompt(R"({"input":"x","text":{"format":{"type":"text"}}})",
                     R"({"messages":[{"role":"user","content":"x"}]})");
  EXPECT_FALSE(parsed(R"({"input":"x","parallel_tool_calls":false})").chat.parallel_tool_calls);
}

TEST(ParseResponses, EffortTable) {
  const std::pair<const char*, const char*> table[] = {
      {"none", "none"}, {"minimal", "low"}, {"low", "low"}, {"medium", "high"},
      {"high", "high"}, {"xhigh", "max"},   {"max", "max"}};
  for (const auto& [effort, k3] : table) {
    const ResponsesCall r = parsed(cat(R"({"input":"x","reasoning":{"effort":")", effort, "\"}}"));
    EXPECT_EQ(r.chat.render["reasoning_effort"], k3) << effort;
    EXPECT_EQ(r.echo["reasoning"]["effort"], effort);
  }
  EXPECT_FALSE(
      chat::thinking_enabled(parsed(R"({"input":"x","reasoning":{"effort":"none"}})").chat.render)
          .value());
  // Thinking is on by default, as in chat completions (effort max).
  auto opts = chat::chat_options(parsed(R"({"input":"x"})").chat.render);
  ASSERT_TRUE(opts.ok());
  EXPECT_TRUE(opts->thinking);
  EXPECT_EQ(opts->effort, "max");
  EXPECT_CONTAINS(responses_error(R"({"input":"x","reasoning":{"effort":"huge"}})"),
                  "'reasoning.effort' 'huge' is not supported");
}

TEST(ParseResponses, LimitsSamplingAndStream) {
  const ResponsesCall r = parsed(
      R"({"input":"x","max_output_tokens":50,"temperature":0.5,"top_p":0.9,"seed":7,"stream":true})");
  EXPECT_EQ(r.chat.max_tokens, 50);
  EXPECT_FLOAT_EQ(*r.chat.sampling.temperature, 0.5f);
  EXPECT_FLOAT_EQ(*r.chat.sampling.top_p, 0.9f);
  EXPECT_EQ(*r.chat.sampling.seed, 7u);
  EXPECT_TRUE(r.chat.stream);
  EXPECT_EQ(r.echo["max_output_tokens"], 50);
  EXPECT_FLOAT_EQ(r.echo["temperature"].get<float>(), 0.5f);
  EXPECT_CONTAINS(responses_error(R"({"input":"x","max_output_tokens":0})"),
                  "'max_output_tokens' must be at least 1");
  EXPECT_CONTAINS(responses_error(R"({"input":"x","temperature":3})"), "'temperature'");
}

TEST(ParseResponses, EchoedFieldsAreAccepted) {
  const ResponsesCall r = parsed(R"({"input":[
      {"type":"reasoning","id":"rs_1","summary":[{"type":"summary_text","text":"s"}],
       "encrypted_content":"opaque","status":"completed"},
      {"type":"message","role":"assistant","id":"m","status":"completed","content":"a"}],
      "store":false,"metadata":{"k":"v"},"include":["reasoning.encrypted_content"],
      "user":"u","truncation":"disabled","service_tier":"auto","background":false,
      "prompt_cache_key":"c","safety_identifier":"s","stream_options":{"include_obfuscation":false}})");
  EXPECT_EQ(r.chat.render["messages"][0]["reasoning_content"], "s");  // the summary when no content
  EXPECT_EQ(r.echo["metadata"], json::parse(R"({"k":"v"})"));
  EXPECT_EQ(r.echo["user"], "u");
  EXPECT_TRUE(parse_responses_request(R"({"input":"x","store":true})").ok());
}

TEST(ParseResponses, RefusesByName) {
  struct Case {
    const char* body;
    const char* message;
    const char* param;
  } cases[] = {
      {R"({})", "'input' is required", "input"},
      {R"({"input":[]})", "'input' must not be empty", "input"},
      {R"({"input":3})", "'input' must be a string or an array", "input"},
      {R"({"input":"x","previous_response_id":"resp_1"})",
       "'previous_response_id' is not supported: this server keeps no responses",
       "previous_response_id"},
      {R"({"input":"x","conversation":"c"})", "'conversation' is not supported", "conversation"},
      {R"({"input":"x","n":2})", "'n' is not a supported field", "n"},
      {R"({"input":"x","stop":"a"})", "'stop' is not a supported field", "stop"},
      {R"({"input":"x","background":true})", "'background' true is not supported", "background"},
      {R"({"input":"x","truncation":"auto"})", "'truncation' 'auto' is not supported",
       "truncation"},
      {R"({"input":"x","top_logprobs":2})", "'top_logprobs' is not supported", "top_logprobs"},
      {R"({"input":"x","include":["message.output_text.logprobs"]})",
       "'include[0]' 'message.output_text.logprobs' is not supported", "include[0]"},
      {R"({"input":"x","tools":[{"type":"web_search"}]})",
       "'tools[0].type' 'web_search' is not supported: only function tools", "tools[0].type"},
      {R"({"input":"x","tools":[{"type":"function"}]})", "'tools[0].name' is required",
       "tools[0].name"},
      {R"({"input":"x","tools":[{"type":"function","name":"f","x":1}]})",
       "'tools[0].x' is not a supported field", "tools[0].x"},
      {R"({"input":"x","tool_choice":"any"})", "'tool_choice' 'any' is not supported",
       "tool_choice"},
      {R"({"input":"x","tool_choice":{"type":"mcp"}})", "'tool_choice.type' 'mcp'",
       "tool_choice.type"},
      {R"({"input":"x","text":{"format":{"type":"json_schema"}}})",
       "'text.format.schema' is required", "text.format.schema"},
      {R"({"input":"x","text":{"format":{"type":"grammar"}}})",
       "'text.format.type' 'grammar' is not supported", "text.format.type"},
      {R"({"input":"x","text":{"verbosity":"low"}})", "'text.verbosity' is not supported",
       "text.verbosity"},
      {R"({"input":[{"type":"item_reference","id":"x"}]})",
       "'input[0].type' 'item_reference' is not supported", "input[0].type"},
      {R"({"input":[{"type":"web_search_call"}]})", "'input[0].type' 'web_search_call'",
       "input[0].type"},
      {R"({"input":[{"role":"user","content":[{"type":"input_image","image_url":"u"}]}]})",
       "'input[0].content[0].type' 'input_image' is not supported", "input[0].content[0].type"},
      {R"({"input":[{"role":"tool","content":"x"}]})", "'input[0].role' 'tool' is not supported",
       "input[0].role"},
      {R"({"input":[{"role":"user","content":"x","extra":1}]})",
       "'input[0].extra' is not a supported field", "input[0].extra"},
      {R"({"input":[{"type":"function_call_output","call_id":"nope","output":"x"}]})",
       "'input[0].call_id' 'nope' names no earlier function_call item", "input[0].call_id"},
      {R"({"input":[{"type":"function_call","call_id":"a","name":"f"}]})",
       "'input[0].arguments' is required", "input[0].arguments"},
  };
  for (const Case& c : cases) {
    StatusOr<ResponsesCall> r = parse_responses_request(c.body);
    ASSERT_FALSE(r.ok()) << c.body;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument) << c.body;
    EXPECT_CONTAINS(msg(r.status()), c.message);
    EXPECT_EQ(error_param(r.status()), c.param) << c.body;
  }
}

// Without --strict-fields an unknown field is recorded by its path (names
// clients echo back, inside objects, silently) and changes nothing.
TEST(ParseResponses, UnknownFieldsAreRecordedAndChangeNothing) {
  const std::string clean =
      R"({"input":[{"role":"user","content":[{"type":"input_text","text":"hi"}]}],)"
      R"("tools":[{"type":"function","name":"f"}]})";
  const std::string noisy =
      R"({"input":[{"role":"user","content":[{"type":"input_text","text":"hi",)"
      R"("cache_control":{},"x_part":1}],"x_item":2}],"x_top":true,)"
      R"("tools":[{"type":"function","name":"f","x_tool":3}]})";
  UnknownFields lenient = unknown_fields_for(false, "docs/responses-api.md");
  StatusOr<ResponsesCall> r = parse_responses_request(noisy, lenient);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->chat.render.dump(), parsed(clean).chat.render.dump());
  EXPECT_EQ(lenient.ignored(),
            (std::vector<std::string>{"x_top", "input[0].x_item", "input[0].content[0].x_part",
                                      "tools[0].x_tool"}));
  const std::string strict = responses_error(noisy);
  EXPECT_CONTAINS(strict, "'x_top' is not a supported field (docs/responses-api.md lists");
}

// docs/responses-api.md's table of the body's fields is the parser's list.
TEST(ParseResponses, FieldsAreTheDocs) {
  std::istringstream in(testing::read_file(testing::source_dir() + "/docs/responses-api.md"));
  std::string line, section;
  std::set<std::string> doc;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) section = line.substr(3);
    if (section != "POST /v1/responses" || line.rfind("| `", 0) != 0) continue;
    doc.insert(line.substr(3, line.find('`', 3) - 3));
  }
  std::set<std::string> code;
  for (std::string_view f : responses_body_fields()) code.insert(std::string(f));
  EXPECT_EQ(doc, code);
  // Each listed field is read: none is refused as unknown.
  for (const std::string& f : code) {
    StatusOr<ResponsesCall> r = parse_responses_request(cat(R"({"input":"x",")", f, R"(":{}})"));
    if (!r.ok())
      EXPECT_EQ(msg(r.status()).find("is not a supported field"), std::string::npos) << f;
  }
}

TEST(ResponseObject, UsageAndStatus) {
  Usage u;
  u.prompt_tokens = 10;
  u.completion_tokens = 5;
  u.cached_tokens = 4;
  u.restored_tokens = 1;
  const json usage = responses_usage_json(u, 3);
  EXPECT_EQ(usage, json::parse(R"({"input_tokens":10,"input_tokens_details":{"cached_tokens":4},
      "output_tokens":5,"output_tokens_details":{"reasoning_tokens":3},"total_tokens":15,
      "k3_restored_tokens":1})"));
  ResponseHead head{"resp_1", 100, "k3", json{{"tools", json::array()}, {"store", false}}};
  json r = response_json(head, ResponseStatus::kIncomplete, json::array(), usage);
  EXPECT_EQ(r["object"], "response");
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"], json::parse(R"({"reason":"max_output_tokens"})"));
  EXPECT_EQ(r["error"], nullptr);
  EXPECT_EQ(r["created_at"], 100);
  EXPECT_EQ(r["store"], false);
  r = response_json(head, ResponseStatus::kCompleted, json::array(), usage);
  EXPECT_EQ(r["incomplete_details"], nullptr);
  EXPECT_EQ(r["status"], "completed");
}

}  // namespace
}  // namespace k3::gateway
