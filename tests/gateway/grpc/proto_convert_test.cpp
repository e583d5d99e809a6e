// gRPC messages to the plain types: the render object matches what the HTTP
// path builds for the same chat, the same checks refuse the same mistakes,
// and the output conversions copy every field.
#include "gateway/grpc/proto_convert.h"

#include "gateway/http/chat_protocol.h"
#include "gtest/gtest.h"
#include "shared/chat/segment.h"
#include "shared/chat/xtml_render.h"

namespace k3::gateway {
namespace {

using nlohmann::ordered_json;

k3serve::v1::ChatRequest tool_chat() {
  k3serve::v1::ChatRequest r;
  r.set_model("k3");
  auto* system = r.add_messages();
  system->set_role("system");
  system->set_content("You are terse.");
  auto* user = r.add_messages();
  user->set_role("user");
  user->set_content("Weather in Paris?");
  user->set_name("ann");
  auto* assistant = r.add_messages();
  assistant->set_role("assistant");
  assistant->set_reasoning_content("Call the tool.");
  auto* call = assistant->add_tool_calls();
  call->set_id("call_1");
  call->set_name("get_weather");
  call->set_arguments(R"({"zeta": 1, "city": "Paris", "alpha": [true]})");
  auto* tool = r.add_messages();
  tool->set_role("tool");
  tool->set_tool_call_id("call_1");
  tool->set_content(R"({"temp": 18})");
  r.set_tools_json(R"([{"type": "function", "function": {"name": "get_weather",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}])");
  r.set_tool_choice("required");
  r.set_thinking_effort("high");
  return r;
}

std::string chat_error(const k3serve::v1::ChatRequest& r) {
  StatusOr<ChatCall> c = chat_call_from_proto(r);
  EXPECT_FALSE(c.ok());
  if (c.ok()) return "";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  return msg(c.status());
}

TEST(ProtoChat, RenderObject) {
  StatusOr<ChatCall> c = chat_call_from_proto(tool_chat());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model, "k3");
  EXPECT_EQ(c->render["messages"], ordered_json::parse(R"([
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "Weather in Paris?", "name": "ann"},
      {"role": "assistant", "reasoning_content": "Call the tool.",
       "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather",
                      "arguments": "{\"zeta\": 1, \"city\": \"Paris\", \"alpha\": [true]}"}}]},
      {"role": "tool", "content": "{\"temp\": 18}", "tool_call_id": "call_1"}])"));
  EXPECT_EQ(c->render["tools"][0]["function"]["name"], "get_weather");
  EXPECT_EQ(c->render["tool_choice"], "required");
  EXPECT_EQ(c->render["thinking_effort"], "high");
  EXPECT_FALSE(c->render.contains("thinking"));
  EXPECT_FALSE(c->render.contains("response_format"));
  EXPECT_TRUE(c->stream);
  EXPECT_EQ(c->max_tokens, 0);
  EXPECT_FALSE(c->sampling.temperature.has_value());  // the model's default
  EXPECT_FALSE(c->sampling.top_p.has_value());
  EXPECT_FALSE(c->sampling.seed.has_value());
}

TEST(ProtoChat, RendersWithArgumentOrderKept) {
  StatusOr<ChatCall> c = chat_call_from_proto(tool_chat());
  ASSERT_TRUE(c.ok()) << c.status();
  StatusOr<chat::Segments> segments = chat::render_chat(c->render);
  ASSERT_TRUE(segments.ok()) << segments.status();
  const std::string text = chat::join_segments(*segments);
  const size_t zeta = text.find("key=\"zeta\"");
  const size_t city = text.find("key=\"city\"");
  const size_t alpha = text.find("key=\"alpha\"");
  ASSERT_NE(alpha, std::string::npos) << text;
  EXPECT_LT(zeta, city);
  EXPECT_LT(city, alpha);
}

// The same chat over HTTP renders to the same segments.
TEST(ProtoChat, SameSegmentsAsHttp) {
  StatusOr<ChatCall> grpc = chat_call_from_proto(tool_chat());
  ASSERT_TRUE(grpc.ok()) << grpc.status();
  StatusOr<ChatCall> http = parse_chat_request(R"({"model": "k3", "messages": [
      {"role": "system", "content": "You are terse."},
      {"role": "user", "content": "Weather in Paris?", "name": "ann"},
      {"role": "assistant", "content": null, "reasoning_content": "Call the tool.",
       "tool_calls": [{"id": "call_1", "type": "function", "function": {"name": "get_weather",
                      "arguments": "{\"zeta\": 1, \"city\": \"Paris\", \"alpha\": [true]}"}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 18}"}],
      "tools": [{"type": "function", "function": {"name": "get_weather",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}}],
      "tool_choice": "required", "reasoning_effort": "medium"})");
  ASSERT_TRUE(http.ok()) << http.status();
  StatusOr<chat::Segments> a = chat::render_chat(grpc->render);
  StatusOr<chat::Segments> b = chat::render_chat(http->render);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(chat::join_segments(*a), chat::join_segments(*b));
}

// The effort as the renderer normalises it: unset (proto3's empty string)
// is the default, max; an unknown one is refused naming the field.
TEST(ProtoChat, ThinkingEffort) {
  k3serve::v1::ChatRequest r = tool_chat();
  r.set_thinking_effort("");
  StatusOr<ChatCall> c = chat_call_from_proto(r);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->render.contains("thinking_effort"));
  EXPECT_EQ(chat::chat_options(c->render)->effort, "max");
  EXPECT_TRUE(chat::chat_options(c->render)->thinking);
  r.set_thinking_effort("low");
  c = chat_call_from_proto(r);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(chat::chat_options(c->render)->effort, "low");
  r.set_thinking_effort("medium");
  EXPECT_EQ(msg(chat_call_from_proto(r).status()),
            "'thinking_effort' 'medium' is not supported; supported values: high, low, max");
  // Refused with thinking off too, as the reference does.
  r.set_enable_thinking(false);
  EXPECT_FALSE(chat_call_from_proto(r).ok());
}

// Stricter than the renderer: an unknown role is refused, naming it.
TEST(ProtoChat, UnknownRoleRefused) {
  k3serve::v1::ChatRequest r = tool_chat();
  r.mutable_messages(0)->set_role("function");
  EXPECT_EQ(msg(chat_call_from_proto(r).status()),
            "'messages[0].role' 'function' is not supported: system, developer, user, assistant "
            "or tool");
}

TEST(ProtoChat, EverySamplingField) {
  k3serve::v1::ChatRequest r = tool_chat();
  k3serve::v1::Sampling* s = r.mutable_sampling();
  s->set_top_k(1);
  s->set_min_p(0.5f);
  s->set_presence_penalty(-1.5f);
  s->set_frequency_penalty(2.0f);
  s->set_repetition_penalty(1.3f);
  (*s->mutable_logit_bias())[12] = -100.0f;
  StatusOr<ChatCall> c = chat_call_from_proto(r);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->sampling.top_k, 1);
  EXPECT_EQ(c->sampling.min_p, 0.5f);
  EXPECT_EQ(c->sampling.presence_penalty, -1.5f);
  EXPECT_EQ(c->sampling.frequency_penalty, 2.0f);
  EXPECT_EQ(c->sampling.repetition_penalty, 1.3f);
  EXPECT_EQ(c->sampling.logit_bias, (std::map<int32_t, float>{{12, -100.0f}}));
  // Ranges as over HTTP, naming the field.
  s->set_repetition_penalty(0.0f);
  EXPECT_NE(msg(chat_call_from_proto(r).status()).find("'repetition_penalty'"), std::string::npos);
  s->set_repetition_penalty(1.0f);
  (*s->mutable_logit_bias())[12] = 250.0f;
  EXPECT_NE(msg(chat_call_from_proto(r).status()).find("'logit_bias'"), std::string::npos);
}

TEST(ProtoChat, OptionalFields) {
  k3serve::v1::ChatRequest r = tool_chat();
  r.set_enable_thinking(false);
  r.set_response_format_json(R"({"type": "json_object"})");
  r.set_tool_choice(R"({"type": "function", "function": {"name": "get_weather"}})");
  r.set_max_tokens(77);
  r.mutable_sampling()->set_temperature(0.0f);
  r.mutable_sampling()->set_top_p(0.25f);
  r.mutable_sampling()->set_seed(99);
  r.add_stop("END");
  StatusOr<ChatCall> c = chat_call_from_proto(r);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->render["enable_thinking"], false);
  EXPECT_FALSE(chat::thinking_enabled(c->render).value());
  EXPECT_EQ(c->render["response_format"]["type"], "json_object");
  EXPECT_EQ(c->render["tool_choice"]["function"]["name"], "get_weather");
  EXPECT_EQ(c->max_tokens, 77);
  EXPECT_EQ(c->sampling.temperature, 0.0f);
  EXPECT_EQ(c->sampling.top_p, 0.25f);
  EXPECT_EQ(c->sampling.seed, 99u);
  EXPECT_FALSE(c->sampling.top_k.has_value());
  EXPECT_EQ(c->stop, (std::vector<std::string>{"END"}));
  ASSERT_TRUE(chat::render_chat(c->render).ok());

  r.set_response_format_json(R"({"type": "text"})");
  c = chat_call_from_proto(r);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->render.contains("response_format"));
}

TEST(ProtoChat, Errors) {
  EXPECT_EQ(chat_error(k3serve::v1::ChatRequest()), "'messages' must not be empty");

  k3serve::v1::ChatRequest r = tool_chat();
  r.set_tools_json(R"({"type": "function"})");
  EXPECT_EQ(chat_error(r), "'tools_json' must be a JSON array");
  r.set_tools_json("[");
  EXPECT_TRUE(chat_error(r).starts_with("'tools_json' is not valid JSON: "));

  r = tool_chat();
  r.set_tool_choice("sometimes");
  EXPECT_EQ(chat_error(r), "'tool_choice' must be auto, none, required or a JSON object");
  r.set_tool_choice("[1]");
  EXPECT_EQ(chat_error(r), "'tool_choice' must be auto, none, required or a JSON object");

  r = tool_chat();
  r.set_response_format_json("[]");
  EXPECT_EQ(chat_error(r), "'response_format_json' must be a JSON object");
  r.set_response_format_json("{");
  EXPECT_TRUE(chat_error(r).starts_with("'response_format_json' is not valid JSON: "));

  r = tool_chat();
  r.mutable_sampling()->set_temperature(2.5f);
  EXPECT_EQ(chat_error(r), "'temperature' must be between 0 and 2");
  r.mutable_sampling()->set_temperature(std::numeric_limits<float>::quiet_NaN());
  EXPECT_EQ(chat_error(r), "'temperature' must be between 0 and 2");
  r = tool_chat();
  r.mutable_sampling()->set_top_p(0.0f);
  EXPECT_EQ(chat_error(r), "'top_p' must be greater than 0 and at most 1");

  r = tool_chat();
  for (const char* s : {"a", "b", "c", "d", "e"}) r.add_stop(s);
  EXPECT_EQ(chat_error(r), "'stop' takes at most 4 strings");
  r = tool_chat();
  r.add_stop("");
  EXPECT_EQ(chat_error(r), "'stop' strings must not be empty");
}

TEST(ProtoCompletion, Forms) {
  k3serve::v1::CompleteRequest r;
  r.set_model("k3");
  r.set_prompt("Once");
  StatusOr<CompletionCall> c = completion_call_from_proto(r);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->model, "k3");
  EXPECT_EQ(c->prompt, "Once");
  EXPECT_FALSE(c->prompt_is_ids);
  EXPECT_EQ(c->max_tokens, 16);
  EXPECT_FALSE(c->sampling.temperature.has_value());  // the model's default

  r.clear_prompt();
  r.add_prompt_ids(3);
  r.add_prompt_ids(4);
  r.set_max_tokens(5);
  r.add_stop("x");
  r.mutable_sampling()->set_seed(7);
  c = completion_call_from_proto(r);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->prompt_is_ids);
  EXPECT_EQ(c->prompt_ids, (std::vector<int32_t>{3, 4}));
  EXPECT_EQ(c->max_tokens, 5);
  EXPECT_EQ(c->stop, (std::vector<std::string>{"x"}));
  EXPECT_EQ(c->sampling.seed, 7u);
}

TEST(ProtoCompletion, Errors) {
  auto error = [](const k3serve::v1::CompleteRequest& r) {
    StatusOr<CompletionCall> c = completion_call_from_proto(r);
    EXPECT_FALSE(c.ok());
    return c.ok() ? std::string() : msg(c.status());
  };
  k3serve::v1::CompleteRequest r;
  EXPECT_EQ(error(r), "exactly one of 'prompt' and 'prompt_ids' must be set");
  r.set_prompt("a");
  r.add_prompt_ids(1);
  EXPECT_EQ(error(r), "exactly one of 'prompt' and 'prompt_ids' must be set");
  r.clear_prompt();
  r.add_prompt_ids(-2);
  EXPECT_EQ(error(r), "'prompt_ids' must not be negative");
  r.clear_prompt_ids();
  r.set_prompt("a");
  r.mutable_sampling()->set_top_p(1.5f);
  EXPECT_EQ(error(r), "'top_p' must be greater than 0 and at most 1");
}

TEST(ProtoOut, Usage) {
  k3serve::v1::Usage u;
  usage_to_proto(
      {.prompt_tokens = 10, .completion_tokens = 5, .cached_tokens = 3, .restored_tokens = 2}, &u);
  EXPECT_EQ(u.prompt_tokens(), 10u);
  EXPECT_EQ(u.completion_tokens(), 5u);
  EXPECT_EQ(u.total_tokens(), 15u);
  EXPECT_EQ(u.cached_tokens(), 3u);
  EXPECT_EQ(u.restored_tokens(), 2u);
  usage_to_proto({.prompt_tokens = int64_t{1} << 40, .completion_tokens = -1}, &u);
  EXPECT_EQ(u.prompt_tokens(), std::numeric_limits<uint32_t>::max());
  EXPECT_EQ(u.completion_tokens(), 0u);
}

TEST(ProtoOut, Progress) {
  k3serve::v1::Progress p;
  ProgressNote n;
  n.phase = ProgressNote::Phase::kQueued;
  n.queued = 4;
  progress_to_proto(n, &p);
  EXPECT_EQ(p.queued(), 4u);
  EXPECT_EQ(p.total(), 0u);
  EXPECT_LT(p.eta_s(), 0);  // nothing read yet: no estimate
  for (auto phase : {ProgressNote::Phase::kPrefill, ProgressNote::Phase::kKeepAlive}) {
    p.Clear();
    n = {};
    n.phase = phase;
    n.done = 3200;
    n.total = 10000;
    n.eta_s = 839.2;
    progress_to_proto(n, &p);
    EXPECT_EQ(p.queued(), 0u);
    EXPECT_EQ(p.done(), 3200u);
    EXPECT_EQ(p.total(), 10000u);
    EXPECT_DOUBLE_EQ(p.eta_s(), 839.2);
  }
}

TEST(ProtoOut, Delta) {
  OutputDelta d;
  d.reasoning_content = "r";
  d.content = "c";
  d.tool_calls.push_back({.index = 0, .id = "call_1", .name = "f", .arguments = "{"});
  d.tool_calls.push_back({.index = 1, .id = "", .name = "", .arguments = "}"});
  k3serve::v1::ChatDelta p;
  delta_to_proto(d, &p);
  EXPECT_EQ(p.reasoning_content(), "r");
  EXPECT_EQ(p.content(), "c");
  ASSERT_EQ(p.tool_calls_size(), 2);
  EXPECT_EQ(p.tool_calls(0).index(), 0u);
  EXPECT_EQ(p.tool_calls(0).id(), "call_1");
  EXPECT_EQ(p.tool_calls(0).name(), "f");
  EXPECT_EQ(p.tool_calls(0).arguments(), "{");
  EXPECT_EQ(p.tool_calls(1).index(), 1u);
  EXPECT_EQ(p.tool_calls(1).id(), "");
  EXPECT_EQ(p.tool_calls(1).arguments(), "}");
}

}  // namespace
}  // namespace k3::gateway
