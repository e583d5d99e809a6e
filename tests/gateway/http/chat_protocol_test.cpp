// gateway/http/chat_protocol.h: the chat request parsing (every field, its
// refusals, each message naming the field, and that a parsed request
// renders) and the chat objects and chunks written back.
#include "gateway/http/chat_protocol.h"

#include <string>

#include "gateway/core/json_text.h"
#include "gateway/http/completion_protocol.h"
#include "gateway/http/response_object.h"
#include "gtest/gtest.h"
#include "shared/chat/segment.h"
#include "shared/chat/xtml_render.h"
#include "tests/gateway/http/protocol_test_support.h"

namespace k3::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

constexpr std::string_view kMessages = R"("messages":[{"role":"user","content":"hi"}])";

// A chat body with the one user message and `extra` fields ("" for none).
std::string chat_body(std::string_view extra) {
  return extra.empty() ? cat("{", kMessages, "}") : cat("{", kMessages, ",", extra, "}");
}

// ---- chat requests ----

TEST(ParseChat, Minimal) {
  StatusOr<ChatCall> r = parse_chat_request(chat_body(""));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->model, "");
  EXPECT_EQ(r->max_tokens, 0);
  EXPECT_FALSE(r->sampling.temperature.has_value());  // the model's default
  EXPECT_FALSE(r->sampling.top_p.has_value());
  EXPECT_FALSE(r->sampling.seed.has_value());
  EXPECT_TRUE(r->stop.empty());
  EXPECT_FALSE(r->stream);
  EXPECT_FALSE(r->include_usage);
  EXPECT_EQ(r->render.dump(), R"({"messages":[{"role":"user","content":"hi"}]})");
}

TEST(ParseChat, AllFields) {
  StatusOr<ChatCall> r = parse_chat_request(chat_body(R"(
      "model": "k3", "max_tokens": 100, "max_completion_tokens": 50, "temperature": 0,
      "top_p": 0.5, "seed": 42, "stop": ["a", "bc"], "n": 1, "stream": true,
      "stream_options": {"include_usage": true}, "logprobs": false,
      "presence_penalty": 0.5, "frequency_penalty": -1, "user": "u1",
      "tools": [{"type": "function", "function": {"name": "f"}}], "tool_choice": "required",
      "response_format": {"type": "json_object"}, "thinking": false,
      "reasoning_effort": "high", "parallel_tool_calls": true)"));
  ASSERT_TRUE(r.ok()) << r.status();
  // A field docs/openai-api.md does not list is refused, not ignored.
  EXPECT_CONTAINS(chat_error(chat_body(R"("some_extension": {"x": 1})")), "'some_extension'");
  EXPECT_EQ(r->model, "k3");
  EXPECT_EQ(r->max_tokens, 50);  // the smaller of the two
  EXPECT_EQ(r->sampling.temperature, 0.0f);
  EXPECT_EQ(r->sampling.top_p, 0.5f);
  EXPECT_EQ(r->sampling.seed, 42u);
  EXPECT_EQ(r->stop, (std::vector<std::string>{"a", "bc"}));
  EXPECT_TRUE(r->stream);
  EXPECT_TRUE(r->include_usage);
  EXPECT_EQ(r->render["tools"][0]["function"]["name"], "f");
  EXPECT_EQ(r->render["tool_choice"], "required");
  EXPECT_EQ(r->render["response_format"]["type"], "json_object");
  EXPECT_EQ(r->render["thinking"], false);
  EXPECT_EQ(r->render["reasoning_effort"], "high");  // passed to the renderer as it is
  // Only the render fields are copied: no extensions, no sampling fields.
  std::vector<std::string> keys;
  for (auto it = r->render.begin(); it != r->render.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"messages", "tools", "tool_choice", "response_format",
                                            "thinking", "reasoning_effort"}));
}

TEST(ParseChat, NullMeansAbsent) {
  StatusOr<ChatCall> r = parse_chat_request(chat_body(R"(
      "model": null, "max_tokens": null, "max_completion_tokens": null, "temperature": null,
      "top_p": null, "seed": null, "stop": null, "n": null, "stream": null,
      "stream_options": null, "logprobs": null, "top_logprobs": null, "tools": null,
      "tool_choice": null, "response_format": null, "thinking": null, "enable_thinking": null,
      "thinking_effort": null, "reasoning_effort": null, "chat_template_kwargs": null,
      "presence_penalty": null, "frequency_penalty": null, "user": null)"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->max_tokens, 0);
  EXPECT_FALSE(r->sampling.temperature.has_value());  // the model's default
  EXPECT_EQ(r->render.size(), 1u);
}

TEST(ParseChat, MaxTokensEitherName) {
  EXPECT_EQ(parse_chat_request(chat_body(R"("max_tokens": 7)"))->max_tokens, 7);
  EXPECT_EQ(parse_chat_request(chat_body(R"("max_completion_tokens": 9)"))->max_tokens, 9);
  EXPECT_EQ(
      parse_chat_request(chat_body(R"("max_tokens": 3, "max_completion_tokens": 9)"))->max_tokens,
      3);
  // Beyond int64: clamped (the core caps it at the context anyway).
  EXPECT_EQ(parse_chat_request(chat_body(R"("max_tokens": 18446744073709551615)"))->max_tokens,
            std::numeric_limits<int64_t>::max());
}

TEST(ParseChat, StopAsString) {
  StatusOr<ChatCall> r = parse_chat_request(chat_body(R"("stop": "\n\n")"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->stop, (std::vector<std::string>{"\n\n"}));
}

TEST(ParseChat, EverySamplingField) {
  StatusOr<ChatCall> r = parse_chat_request(chat_body(R"(
      "temperature": 1.5, "top_p": 0.9, "top_k": 40, "min_p": 0.05, "presence_penalty": 0.5,
      "frequency_penalty": -1, "repetition_penalty": 1.1, "seed": 5,
      "logit_bias": {"17": -100, "2": 3.5})"));
  ASSERT_TRUE(r.ok()) << r.status();
  const SamplingOptions& s = r->sampling;
  EXPECT_EQ(s.temperature, 1.5f);
  EXPECT_EQ(s.top_p, 0.9f);
  EXPECT_EQ(s.top_k, 40);
  EXPECT_EQ(s.min_p, 0.05f);
  EXPECT_EQ(s.presence_penalty, 0.5f);
  EXPECT_EQ(s.frequency_penalty, -1.0f);
  EXPECT_EQ(s.repetition_penalty, 1.1f);
  EXPECT_EQ(s.seed, 5u);
  EXPECT_EQ(s.logit_bias, (std::map<int32_t, float>{{2, 3.5f}, {17, -100.0f}}));
  // The same fields on completions.
  StatusOr<CompletionCall> c =
      parse_completion_request(R"({"prompt": "x", "top_k": -1, "logit_bias": {"0": 1}})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sampling.top_k, -1);
  EXPECT_EQ(c->sampling.logit_bias.at(0), 1.0f);
}

TEST(ParseChat, Logprobs) {
  StatusOr<ChatCall> r = parse_chat_request(
      chat_body(R"("logprobs": true, "top_logprobs": 20, "return_tokens_as_token_ids": true)"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->logprobs);
  EXPECT_EQ(r->top_logprobs, 20);
  EXPECT_TRUE(r->tokens_as_ids);
  StatusOr<CompletionCall> c = parse_completion_request(R"({"prompt": "a", "logprobs": 0})");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->logprobs, 0);
  c = parse_completion_request(R"({"prompt": "a"})");
  EXPECT_FALSE(c->logprobs.has_value());
}

TEST(Responses, ChatLogprobsInOpenAisShapes) {
  const OutputMessage m = message_with_logprobs();
  // (Through the body's text: invalid UTF-8 becomes U+FFFD there.)
  const json chat = json::parse(dump_body(chat_completion_json("c", 1, "k3", m, Finish{})));
  EXPECT_EQ(chat["choices"][0]["logprobs"], json::parse(R"({"content": [
      {"token": "hi", "logprob": -0.5, "bytes": [104, 105], "top_logprobs": [
        {"token": "hi", "logprob": -0.5, "bytes": [104, 105]},
        {"token": "\ufffd", "logprob": -2.0, "bytes": [255]}]}], "refusal": null})"))
      << chat.dump();
}

TEST(ParseChat, NegativeSeedKeepsItsBits) {
  StatusOr<ChatCall> r = parse_chat_request(chat_body(R"("seed": -1)"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sampling.seed, std::numeric_limits<uint64_t>::max());
}

// The thinking options as the renderer normalises them (chat::chat_options):
// "on/EFFORT" or "off".
std::string thinking_of(std::string_view extra) {
  StatusOr<ChatCall> r = parse_chat_request(chat_body(extra));
  EXPECT_TRUE(r.ok()) << extra << ": " << r.status();
  if (!r.ok()) return "error";
  StatusOr<chat::ChatOptions> o = chat::chat_options(r->render);
  EXPECT_TRUE(o.ok()) << extra << ": " << o.status();
  if (!o.ok()) return "error";
  return o->thinking ? "on/" + o->effort : "off";
}

TEST(ParseChat, ThinkingForms) {
  EXPECT_EQ(thinking_of(""), "on/max");  // the reference's default effort
  EXPECT_EQ(thinking_of(R"("enable_thinking": false)"), "off");
  EXPECT_EQ(thinking_of(R"("thinking": true)"), "on/max");
  EXPECT_EQ(thinking_of(R"("thinking": {"type": "disabled"})"), "off");
  EXPECT_EQ(thinking_of(R"("thinking": {"type": "enabled"})"), "on/max");
  // Anthropic's budget is not something K3 does: refused, not ignored.
  EXPECT_CONTAINS(
      chat_error(chat_body(R"("thinking": {"type": "enabled", "budget_tokens": 1000})")),
      "'thinking.budget_tokens'");
  EXPECT_EQ(thinking_of(R"("chat_template_kwargs": {"enable_thinking": false})"), "off");
  // Top-level fields win over chat_template_kwargs, `thinking` over
  // enable_thinking (the reference's precedence).
  EXPECT_EQ(
      thinking_of(R"("chat_template_kwargs": {"enable_thinking": false}, "enable_thinking": true)"),
      "on/max");
  EXPECT_EQ(thinking_of(R"("enable_thinking": true, "thinking": false)"), "off");
  EXPECT_EQ(thinking_of(R"("enable_thinking": false, "thinking": true)"), "on/max");
  EXPECT_EQ(thinking_of(R"("chat_template_kwargs": {"thinking": false}, "enable_thinking": true)"),
            "off");
}

TEST(ParseChat, EffortForms) {
  EXPECT_EQ(thinking_of(R"("thinking_effort": "low")"), "on/low");
  EXPECT_EQ(thinking_of(R"("chat_template_kwargs": {"thinking_effort": "high"})"), "on/high");
  EXPECT_EQ(thinking_of(R"("chat_template_kwargs": {"thinking_effort": "high"},
                           "thinking_effort": "low")"),
            "on/low");
  // thinking_effort wins over reasoning_effort.
  EXPECT_EQ(thinking_of(R"("reasoning_effort": "low", "thinking_effort": "max")"), "on/max");
  // OpenAI's names: medium and minimal mapped (our deviation); the model's
  // own and none pass through as in the reference.
  EXPECT_EQ(thinking_of(R"("reasoning_effort": "minimal")"), "on/low");
  EXPECT_EQ(thinking_of(R"("reasoning_effort": "low")"), "on/low");
  EXPECT_EQ(thinking_of(R"("reasoning_effort": "medium")"), "on/high");
  EXPECT_EQ(thinking_of(R"("reasoning_effort": "high")"), "on/high");
  EXPECT_EQ(thinking_of(R"("reasoning_effort": "max")"), "on/max");
  EXPECT_EQ(thinking_of(R"("reasoning_effort": "none")"), "off");
  EXPECT_EQ(thinking_of(R"("reasoning_effort": "none", "thinking": true)"), "off");
  // Thinking off still checks the effort (the reference does).
  EXPECT_EQ(thinking_of(R"("thinking": false, "thinking_effort": "low")"), "off");
  // Errors name the field the client sent and the supported values.
  EXPECT_EQ(chat_error(chat_body(R"("reasoning_effort": "xhigh")")),
            "'reasoning_effort' 'xhigh' is not supported; supported values: high, low, max "
            "(the model's thinking_effort), or none");
  EXPECT_EQ(chat_error(chat_body(R"("thinking_effort": "medium")")),
            "'thinking_effort' 'medium' is not supported; supported values: high, low, max");
  EXPECT_EQ(chat_error(chat_body(R"("thinking": false, "thinking_effort": "medium")")),
            "'thinking_effort' 'medium' is not supported; supported values: high, low, max");
  EXPECT_EQ(chat_error(chat_body(R"("chat_template_kwargs": {"thinking_effort": "x"})")),
            "'thinking_effort' 'x' is not supported; supported values: high, low, max");
}

TEST(ParseChat, ResponseFormatTextIsAbsent) {
  StatusOr<ChatCall> r = parse_chat_request(chat_body(R"("response_format": {"type": "text"})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->render.contains("response_format"));
}

TEST(ParseChat, ToolChoiceObject) {
  StatusOr<ChatCall> r = parse_chat_request(
      chat_body(R"("tool_choice": {"type": "function", "function": {"name": "f"}})"));
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->render["tool_choice"]["function"]["name"], "f");
}

TEST(ParseChat, BodyErrors) {
  EXPECT_CONTAINS(chat_error(""), "invalid JSON");
  EXPECT_CONTAINS(chat_error("{"), "invalid JSON");
  EXPECT_CONTAINS(chat_error(R"({"messages": [}")"), "invalid JSON");
  EXPECT_CONTAINS(chat_error("[1, 2]"), "must be a JSON object");
  EXPECT_CONTAINS(chat_error("\"text\""), "must be a JSON object");
  // Ill-formed UTF-8 inside a string.
  EXPECT_CONTAINS(chat_error("{\"model\": \"\xff\"}"), "invalid JSON");
  // Nesting deep enough to overflow a recursive walker is refused up front.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  EXPECT_CONTAINS(chat_error(deep), "nested deeper than");
  EXPECT_CONTAINS(
      chat_error(chat_body(cat(R"("x": )", std::string(200, '['), std::string(200, ']')))),
      "nested deeper than");
  // Brackets inside strings do not count.
  const std::string brackets(1000, '[');
  EXPECT_TRUE(
      parse_chat_request(cat(R"({"messages":[{"role":"user","content":")", brackets, R"("}]})"))
          .ok());
}

TEST(ParseChat, InvalidJsonMessageIsReadable) {
  const std::string m = chat_error("{\"a\": tru}");
  EXPECT_TRUE(m.starts_with("invalid JSON: parse error at line 1")) << m;
  EXPECT_EQ(m.find("[json.exception"), std::string::npos) << m;
}

TEST(ParseChat, MessagesErrors) {
  EXPECT_EQ(chat_error("{}"), "'messages' is required");
  EXPECT_EQ(chat_error(R"({"messages": null})"), "'messages' is required");
  EXPECT_EQ(chat_error(R"({"messages": {}})"), "'messages' must be an array");
  EXPECT_EQ(chat_error(R"({"messages": []})"), "'messages' must not be empty");
  // Stricter than the renderer (which skips what the reference skips): the
  // parser refuses unknown roles, non-object messages and non-text parts.
  EXPECT_EQ(chat_error(R"({"messages": [{"role": "function", "content": "x"}]})"),
            "'messages[0].role' 'function' is not supported: system, developer, user, assistant "
            "or tool");
  EXPECT_EQ(chat_error(R"({"messages": ["hi"]})"), "'messages[0]' must be an object");
  EXPECT_EQ(chat_error(R"({"messages": [{"content": "x"}]})"), "'messages[0].role' is required");
  EXPECT_EQ(chat_error(R"({"messages": [{"role": 1}]})"), "'messages[0].role' must be a string");
  EXPECT_EQ(chat_error(R"({"messages": [{"role": "user", "content": 5}]})"),
            "'messages[0].content' must be a string or an array of parts");
  EXPECT_EQ(chat_error(R"({"messages": [{"role": "user", "content": [{"type": "image_url"}]}]})"),
            "'messages[0].content[0]' is not supported: only text parts ({\"type\": \"text\", "
            "\"text\": ...})");
  EXPECT_EQ(chat_error(R"({"messages": [{"role": "user", "content": [{"type": "text"}]}]})"),
            "'messages[0].content[0].text' must be a string");
}

// Every field with a wrong type or value: the message names the field.
TEST(ParseChat, FieldErrorsNameTheField) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {R"("model": 3)", "'model' must be a string"},
      {R"("temperature": "hot")", "'temperature' must be a number"},
      {R"("temperature": 2.5)", "'temperature' must be between 0 and 2"},
      {R"("temperature": -0.1)", "'temperature' must be between 0 and 2"},
      {R"("top_p": 0)", "'top_p' must be greater than 0 and at most 1"},
      {R"("top_p": 1.5)", "'top_p' must be greater than 0 and at most 1"},
      {R"("top_p": true)", "'top_p' must be a number"},
      {R"("seed": 1.5)", "'seed' must be an integer"},
      {R"("seed": "1")", "'seed' must be an integer"},
      {R"("max_tokens": 0)", "'max_tokens' must be at least 1"},
      {R"("max_tokens": -5)", "'max_tokens' must be at least 1"},
      {R"("max_tokens": 1.5)", "'max_tokens' must be an integer"},
      {R"("max_tokens": "10")", "'max_tokens' must be an integer"},
      {R"("max_completion_tokens": 0)", "'max_completion_tokens' must be at least 1"},
      {R"("stop": 5)", "'stop' must be a string or an array of strings"},
      {R"("stop": ["a", 5])", "'stop' must be a string or an array of strings"},
      {R"("stop": ["a", "b", "c", "d", "e"])", "'stop' takes at most 4 strings"},
      {R"("stop": ["a", ""])", "'stop' strings must not be empty"},
      {R"("stop": "")", "'stop' strings must not be empty"},
      {R"("n": 9)", "'n' must be between 1 and 8"},
      {R"("n": 0)", "'n' must be between 1 and 8"},
      {R"("n": "1")", "'n' must be an integer"},
      {R"("stream": "yes")", "'stream' must be a boolean"},
      {R"("stream_options": 1)", "'stream_options' must be an object"},
      {R"("stream_options": {"include_usage": 1})",
       "'stream_options.include_usage' must be a boolean"},
      {R"("logprobs": 1)", "'logprobs' must be a boolean"},
      {R"("top_logprobs": 3)", "'top_logprobs' needs 'logprobs': true"},
      {R"("logprobs": true, "top_logprobs": 21)", "'top_logprobs' must be between 0 and 20"},
      {R"("logprobs": true, "top_logprobs": -1)", "'top_logprobs' must be between 0 and 20"},
      {R"("return_tokens_as_token_ids": 1)", "'return_tokens_as_token_ids' must be a boolean"},
      {R"("audio": {"voice": "alloy"})", "'audio' is not supported"},
      {R"("functions": [])", "'functions' is not supported"},
      {R"("function_call": "auto")", "'function_call' is not supported"},
      {R"("metadata": {})", "'metadata' is not supported"},
      {R"("store": true)", "'store' true is not supported: this server keeps no completions"},
      {R"("store": "no")", "'store' must be a boolean"},
      {R"("service_tier": "flex")", "'service_tier' 'flex' is not supported: auto or default"},
      {R"("modalities": ["audio"])", "'modalities' is not supported beyond [\"text\"]"},
      {R"("safety_identifier": 3)", "'safety_identifier' must be a string"},
      {R"("presence_penalty": "x")", "'presence_penalty' must be a number"},
      {R"("frequency_penalty": [])", "'frequency_penalty' must be a number"},
      {R"("presence_penalty": 2.5)", "'presence_penalty' must be between -2 and 2"},
      {R"("frequency_penalty": -2.0000001)", "'frequency_penalty' must be between -2 and 2"},
      {R"("repetition_penalty": 0)", "'repetition_penalty' must be greater than 0 and at most 10"},
      {R"("min_p": 1.5)", "'min_p' must be between 0 and 1"},
      {R"("top_k": 2.5)", "'top_k' must be an integer"},
      {R"("top_k": -2)", "'top_k' must be -1 (no limit), 0 (no limit) or more"},
      {R"("logit_bias": [1])", "'logit_bias' must be an object of token ids to numbers"},
      {R"("logit_bias": {"x": 1})", "'logit_bias' key 'x' is not a token id"},
      {R"("logit_bias": {"-3": 1})", "'logit_bias' key '-3' is not a token id"},
      {R"("logit_bias": {"99999999999": 1})", "'logit_bias' key '99999999999' is not a token id"},
      {R"("logit_bias": {"7": "1"})", "'logit_bias' of token 7 must be a number"},
      {R"("logit_bias": {"7": 101})", "'logit_bias' of token 7 must be between -100 and 100"},
      {R"("user": 7)", "'user' must be a string"},
      {R"("tools": {})", "'tools' must be an array"},
      {R"("tool_choice": 1)", "'tool_choice' must be a string or an object"},
      {R"("response_format": "json")", "'response_format' must be an object"},
      {R"("enable_thinking": "yes")", "'enable_thinking' must be a boolean"},
      {R"("thinking": 1)", "'thinking' must be a boolean or an object"},
      {R"("thinking": {"type": "auto"})", "'thinking.type' must be \"enabled\" or \"disabled\""},
      {R"("thinking_effort": 3)", "'thinking_effort' must be a string"},
      {R"("reasoning_effort": true)", "'reasoning_effort' must be a string"},
      {R"("chat_template_kwargs": [])", "'chat_template_kwargs' must be an object"},
      {R"("chat_template_kwargs": {"enable_thinking": 1})",
       "'chat_template_kwargs.enable_thinking' must be a boolean"},
      {R"("chat_template_kwargs": {"thinking_effort": 1})",
       "'chat_template_kwargs.thinking_effort' must be a string"},
  };
  for (const auto& [extra, expected] : cases) {
    EXPECT_EQ(chat_error(chat_body(extra)), expected) << extra;
  }
}

// ---- the render object ----

constexpr std::string_view kToolChat = R"({
  "model": "k3",
  "messages": [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Weather in Paris?"},
    {"role": "assistant", "content": "", "reasoning_content": "Call the tool.",
     "tool_calls": [{"id": "call_1", "type": "function",
                     "function": {"name": "get_weather",
                                  "arguments": {"zeta": 1, "city": "Paris", "alpha": [true]}}}]},
    {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 18}"},
    {"role": "user", "content": "Thanks"}
  ],
  "tools": [{"type": "function", "function": {"name": "get_weather", "description": "Weather",
             "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
  "tool_choice": "auto",
  "thinking_effort": "high"
})";

TEST(ParseChat, RenderKeepsArgumentKeyOrder) {
  StatusOr<ChatCall> r = parse_chat_request(kToolChat);
  ASSERT_TRUE(r.ok()) << r.status();
  const ordered_json& args = r->render["messages"][2]["tool_calls"][0]["function"]["arguments"];
  std::vector<std::string> keys;
  for (auto it = args.begin(); it != args.end(); ++it) keys.push_back(it.key());
  EXPECT_EQ(keys, (std::vector<std::string>{"zeta", "city", "alpha"}));
  EXPECT_EQ(args.dump(), R"({"zeta":1,"city":"Paris","alpha":[true]})");
}

TEST(ParseChat, RenderIsAcceptedByRenderChat) {
  StatusOr<ChatCall> r = parse_chat_request(kToolChat);
  ASSERT_TRUE(r.ok()) << r.status();
  StatusOr<chat::Segments> segments = chat::render_chat(r->render);
  ASSERT_TRUE(segments.ok()) << segments.status();
  const std::string text = chat::join_segments(*segments);
  // The arguments in the client's key order, not sorted.
  const size_t zeta = text.find("key=\"zeta\"");
  const size_t city = text.find("key=\"city\"");
  const size_t alpha = text.find("key=\"alpha\"");
  ASSERT_NE(zeta, std::string::npos) << text;
  ASSERT_NE(city, std::string::npos) << text;
  ASSERT_NE(alpha, std::string::npos) << text;
  EXPECT_LT(zeta, city);
  EXPECT_LT(city, alpha);
  EXPECT_CONTAINS(text, "get_weather");
  EXPECT_CONTAINS(text, "Call the tool.");
  EXPECT_CONTAINS(text, "{\"temp\": 18}");
  // Thinking on by default: the generation prompt opens the think channel.
  EXPECT_TRUE(text.ends_with("<|open|>think<|sep|>")) << text;
}

TEST(ParseChat, RenderWithThinkingOff) {
  StatusOr<ChatCall> r = parse_chat_request(chat_body(R"("enable_thinking": false)"));
  ASSERT_TRUE(r.ok()) << r.status();
  StatusOr<chat::Segments> segments = chat::render_chat(r->render);
  ASSERT_TRUE(segments.ok()) << segments.status();
  EXPECT_TRUE(chat::join_segments(*segments).ends_with("<|open|>response<|sep|>"));
  EXPECT_EQ(chat::join_segments(*segments).find("thinking-effort"), std::string::npos);
}

// The prompt carries the effort the request resolves to: the default, max,
// or OpenAI's medium as the model's high.
TEST(ParseChat, RenderCarriesTheEffort) {
  for (const auto& [extra, line] : std::vector<std::pair<std::string, std::string>>{
           {"", "`thinking_effort=max`."},
           {R"("reasoning_effort": "medium")", "`thinking_effort=high`."},
           {R"("reasoning_effort": "minimal")", "`thinking_effort=low`."},
           {R"("thinking_effort": "low", "reasoning_effort": "high")", "`thinking_effort=low`."}}) {
    StatusOr<ChatCall> r = parse_chat_request(chat_body(extra));
    ASSERT_TRUE(r.ok()) << r.status();
    StatusOr<chat::Segments> segments = chat::render_chat(r->render);
    ASSERT_TRUE(segments.ok()) << segments.status();
    const std::string prompt = chat::join_segments(*segments);
    EXPECT_NE(prompt.find(cat("type=\"thinking-effort\"<|sep|>")), std::string::npos) << extra;
    EXPECT_NE(prompt.find(line), std::string::npos) << extra << ": " << prompt;
  }
}

// ---- responses ----

TEST(Responses, ChatCompletion) {
  OutputMessage m;
  m.content = "Hello";
  m.reasoning_content = "think";
  Finish f;
  f.reason = FinishReason::kLength;
  f.usage = {.prompt_tokens = 10, .completion_tokens = 5, .cached_tokens = 4, .restored_tokens = 2};
  const json j = chat_completion_json("chatcmpl-1", 1700000000, "k3", m, f);
  EXPECT_EQ(j, json::parse(R"({
    "id": "chatcmpl-1", "object": "chat.completion", "created": 1700000000, "model": "k3",
    "choices": [{"index": 0, "logprobs": null, "finish_reason": "length",
                 "message": {"role": "assistant", "content": "Hello",
                             "reasoning_content": "think"}}],
    "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15,
              "prompt_tokens_details": {"cached_tokens": 4}, "k3_restored_tokens": 2}})"));
}

TEST(Responses, ChatCompletionWithToolCalls) {
  OutputMessage m;
  m.tool_calls.push_back({"call_a", "get_weather", R"({"city":"Paris"})"});
  m.tool_calls.push_back({"call_b", "noop", "{}"});
  Finish f;
  f.reason = FinishReason::kToolCalls;
  const json j = chat_completion_json("c", 1, "k3", m, f);
  const json& message = j["choices"][0]["message"];
  EXPECT_EQ(message, json::parse(R"({"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_a", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\"}"}},
      {"id": "call_b", "type": "function", "function": {"name": "noop", "arguments": "{}"}}]})"));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "tool_calls");
}

TEST(Responses, ChatCompletionEmptyContentIsString) {
  const json j = chat_completion_json("c", 1, "k3", OutputMessage{}, Finish{});
  EXPECT_EQ(j["choices"][0]["message"], json::parse(R"({"role":"assistant","content":""})"));
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop");
}

TEST(Responses, ChatChunks) {
  OutputDelta first;
  json j = chat_chunk_json("c", 5, "k3", first, /*first=*/true);
  EXPECT_EQ(j, json::parse(R"({"id": "c", "object": "chat.completion.chunk", "created": 5,
      "model": "k3", "choices": [{"index": 0, "delta": {"role": "assistant", "content": ""},
      "logprobs": null, "finish_reason": null}]})"));

  OutputDelta reasoning;
  reasoning.reasoning_content = "hm";
  j = chat_chunk_json("c", 5, "k3", reasoning, false);
  EXPECT_EQ(j["choices"][0]["delta"], json::parse(R"({"reasoning_content": "hm"})"));

  OutputDelta text;
  text.content = "Hi";
  j = chat_chunk_json("c", 5, "k3", text, true);
  EXPECT_EQ(j["choices"][0]["delta"], json::parse(R"({"role": "assistant", "content": "Hi"})"));

  OutputDelta call_open;
  call_open.tool_calls.push_back({.index = 0, .id = "call_x", .name = "f", .arguments = ""});
  j = chat_chunk_json("c", 5, "k3", call_open, false);
  EXPECT_EQ(j["choices"][0]["delta"], json::parse(R"({"tool_calls": [{"index": 0, "id": "call_x",
      "type": "function", "function": {"name": "f", "arguments": ""}}]})"));

  OutputDelta call_more;
  call_more.tool_calls.push_back({.index = 1, .id = "", .name = "", .arguments = "{\"a\":"});
  j = chat_chunk_json("c", 5, "k3", call_more, false);
  EXPECT_EQ(j["choices"][0]["delta"],
            json::parse(R"({"tool_calls": [{"index": 1, "function": {"arguments": "{\"a\":"}}]})"));
  EXPECT_TRUE(j["choices"][0]["finish_reason"].is_null());
}

TEST(Responses, FinishAndUsageChunks) {
  EXPECT_EQ(chat_finish_chunk_json("c", 5, "k3", FinishReason::kStop),
            json::parse(R"({"id": "c", "object": "chat.completion.chunk", "created": 5,
                "model": "k3", "choices": [{"index": 0, "delta": {}, "logprobs": null,
                "finish_reason": "stop"}]})"));
  const Usage u{.prompt_tokens = 3, .completion_tokens = 4};
  EXPECT_EQ(usage_chunk_json("c", 5, "k3", u, true),
            json::parse(R"({"id": "c", "object": "chat.completion.chunk", "created": 5,
                "model": "k3", "choices": [], "usage": {"prompt_tokens": 3,
                "completion_tokens": 4, "total_tokens": 7,
                "prompt_tokens_details": {"cached_tokens": 0}, "k3_restored_tokens": 0}})"));
  EXPECT_EQ(usage_chunk_json("c", 5, "k3", u, false)["object"], "text_completion");
}

}  // namespace
}  // namespace k3::gateway
