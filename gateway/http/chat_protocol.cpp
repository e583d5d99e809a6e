#include "gateway/http/chat_protocol.h"

#include <algorithm>
#include <optional>
#include <string>
#include <utility>

#include "gateway/core/status_codes.h"
#include "gateway/http/common_fields.h"
#include "gateway/http/field_reader.h"
#include "gateway/http/request_fields.h"
#include "gateway/http/response_object.h"
#include "shared/chat/xtml_render.h"

namespace k3::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// `thinking`: a bool, or Anthropic's {"type": "enabled"|"disabled"} (its
// budget_tokens is refused by name: the model has no thinking budget).
StatusOr<std::optional<bool>> parse_thinking_field(const FieldReader& f) {
  const ordered_json* v = f.get("thinking");
  if (v == nullptr) return std::optional<bool>();
  if (v->is_boolean()) return std::optional<bool>(v->get<bool>());
  if (v->is_object()) {
    if (auto budget = v->find("budget_tokens"); budget != v->end() && !budget->is_null())
      return with_param(
          invalid("'thinking.budget_tokens' is not supported: K3 has no thinking budget (limit the "
                  "whole reply with max_tokens, or choose an effort with thinking_effort)"),
          "thinking.budget_tokens");
    auto type = v->find("type");
    if (type != v->end() && *type == "enabled") return std::optional<bool>(true);
    if (type != v->end() && *type == "disabled") return std::optional<bool>(false);
    return invalid("'thinking.type' must be \"enabled\" or \"disabled\"");
  }
  return invalid("'thinking' must be a boolean or an object");
}

// OpenAI's reasoning_effort vocabulary in the model's (a documented
// deviation, docs/openai-api.md): medium -> high, minimal -> low; anything
// else (low, high, max, none, or a value the renderer refuses) as it is.
std::string map_reasoning_effort(std::string effort) {
  if (effort == "medium") return "high";
  if (effort == "minimal") return "low";
  return effort;
}

// Copies the thinking options into `render`, where chat::chat_options
// normalises them exactly as the reference does (its precedence, its default
// effort, its refusals). Each field may also come in chat_template_kwargs;
// the top-level one wins. Refused here: only wrong types.
Status parse_thinking(const FieldReader& f, ordered_json& render) {
  std::optional<bool> thinking;
  std::optional<bool> enable_thinking;
  std::optional<std::string> thinking_effort;
  K3_ASSIGN_OR_RETURN(std::optional<FieldReader> kwargs, f.object("chat_template_kwargs"));
  if (kwargs.has_value()) {
    K3_ASSIGN_OR_RETURN(enable_thinking, kwargs->boolean("enable_thinking"));
    K3_ASSIGN_OR_RETURN(thinking, kwargs->boolean("thinking"));
    K3_ASSIGN_OR_RETURN(thinking_effort, kwargs->string("thinking_effort"));
  }
  K3_ASSIGN_OR_RETURN(std::optional<bool> top_enable, f.boolean("enable_thinking"));
  if (top_enable.has_value()) enable_thinking = top_enable;
  K3_ASSIGN_OR_RETURN(std::optional<bool> top_thinking, parse_thinking_field(f));
  if (top_thinking.has_value()) thinking = top_thinking;
  K3_ASSIGN_OR_RETURN(std::optional<std::string> top_effort, f.string("thinking_effort"));
  if (top_effort.has_value()) thinking_effort = std::move(top_effort);
  K3_ASSIGN_OR_RETURN(std::optional<std::string> reasoning_effort, f.string("reasoning_effort"));

  if (thinking.has_value()) render["thinking"] = *thinking;
  if (enable_thinking.has_value()) render["enable_thinking"] = *enable_thinking;
  if (reasoning_effort.has_value()) {
    render["reasoning_effort"] = map_reasoning_effort(std::move(*reasoning_effort));
  }
  if (thinking_effort.has_value()) render["thinking_effort"] = std::move(*thinking_effort);
  // The renderer's refusal, at parse time: a 400 naming the field and the
  // supported values.
  return chat::chat_options(render).status();
}

// The token's bytes as OpenAI's list of integers.
json bytes_json(const std::string& bytes) {
  json out = json::array();
  for (unsigned char c : bytes) out.push_back(static_cast<int>(c));
  return out;
}

// Chat's {"content": [{"token", "logprob", "bytes", "top_logprobs"}]}.
json chat_logprobs_json(const std::optional<std::vector<LogprobEntry>>& logprobs) {
  if (!logprobs) return nullptr;
  json content = json::array();
  for (const LogprobEntry& e : *logprobs) {
    json top = json::array();
    for (const TokenLogprob& t : e.top)
      top.push_back({{"token", t.token}, {"logprob", t.logprob}, {"bytes", bytes_json(t.bytes)}});
    content.push_back({{"token", e.token},
                       {"logprob", e.logprob},
                       {"bytes", bytes_json(e.bytes)},
                       {"top_logprobs", std::move(top)}});
  }
  return {{"content", std::move(content)}, {"refusal", nullptr}};
}

json tool_call_json(const ToolCallFull& call) {
  return {{"id", call.id},
          {"type", "function"},
          {"function", {{"name", call.name}, {"arguments", call.arguments}}}};
}

// Chat fields of OpenAI's API this server does not do, refused by name
// rather than ignored (docs/openai-api.md); and those it accepts with no
// effect, type-checked.
Status refuse_unsupported_chat_fields(const FieldReader& f) {
  for (const char* key : {"audio", "functions", "function_call", "prediction", "web_search_options",
                          "verbosity", "metadata"}) {
    if (f.get(key) != nullptr) return invalid(cat(f.name(key), " is not supported"));
  }
  K3_ASSIGN_OR_RETURN(std::optional<bool> store, f.boolean("store"));
  if (store.value_or(false))
    return invalid(
        "'store' true is not supported: this server keeps no "
        "completions");
  K3_ASSIGN_OR_RETURN(std::optional<std::string> tier, f.string("service_tier"));
  if (tier.has_value() && *tier != "auto" && *tier != "default")
    return invalid(cat("'service_tier' '", *tier, "' is not supported: auto or default"));
  if (const ordered_json* modalities = f.get("modalities")) {
    if (*modalities != ordered_json::array({"text"}))
      return invalid("'modalities' is not supported beyond [\"text\"]");
  }
  // OpenAI's end-user and cache-routing ids: nothing here uses them.
  K3_RETURN_IF_ERROR(f.string("safety_identifier").status());
  K3_RETURN_IF_ERROR(f.string("prompt_cache_key").status());
  return absl::OkStatus();
}

json chat_message_json(const OutputMessage& message) {
  json m = {{"role", "assistant"}};
  // OpenAI sends content null for a message that only calls tools.
  if (message.content.empty() && !message.tool_calls.empty()) {
    m["content"] = nullptr;
  } else {
    m["content"] = message.content;
  }
  if (!message.reasoning_content.empty()) m["reasoning_content"] = message.reasoning_content;
  if (!message.tool_calls.empty()) {
    json calls = json::array();
    for (const ToolCallFull& call : message.tool_calls) calls.push_back(tool_call_json(call));
    m["tool_calls"] = std::move(calls);
  }
  return m;
}

}  // namespace

StatusOr<ChatCall> parse_chat_request(std::string_view body) {
  UnknownFields strict(UnknownFieldPolicy::kRefuse);
  return parse_chat_request(body, strict);
}

StatusOr<ChatCall> parse_chat_request(std::string_view body, UnknownFields& unknown) {
  K3_ASSIGN_OR_RETURN(ordered_json request, parse_body(body));
  K3_RETURN_IF_ERROR(check_request_fields("/v1/chat/completions", request, unknown));
  const FieldReader f(request);
  ChatCall call;
  K3_RETURN_IF_ERROR(parse_common_into(f, call));
  K3_RETURN_IF_ERROR(refuse_unsupported_chat_fields(f));

  const ordered_json* messages = f.get("messages");
  if (messages == nullptr) return invalid("'messages' is required");
  if (!messages->is_array()) return invalid("'messages' must be an array");
  if (messages->empty()) return invalid("'messages' must not be empty");
  call.render["messages"] = *messages;

  if (const ordered_json* tools = f.get("tools")) {
    if (!tools->is_array()) return invalid("'tools' must be an array");
    call.render["tools"] = *tools;
  }
  if (const ordered_json* choice = f.get("tool_choice")) {
    if (!choice->is_string() && !choice->is_object()) {
      return invalid("'tool_choice' must be a string or an object");
    }
    call.render["tool_choice"] = *choice;
  }
  if (const ordered_json* format = f.get("response_format")) {
    if (!format->is_object()) return invalid("'response_format' must be an object");
    auto type = format->find("type");
    // {"type": "text"} is the default: no response-format note in the prompt.
    if (type == format->end() || *type != "text") call.render["response_format"] = *format;
  }
  K3_RETURN_IF_ERROR(parse_thinking(f, call.render));
  // parallel_tool_calls: false allows at most one call (the output constraint).
  K3_ASSIGN_OR_RETURN(std::optional<bool> parallel, f.boolean("parallel_tool_calls"));
  call.parallel_tool_calls = parallel.value_or(true);

  K3_ASSIGN_OR_RETURN(std::optional<int64_t> max_tokens, f.count("max_tokens"));
  K3_ASSIGN_OR_RETURN(std::optional<int64_t> max_completion_tokens,
                      f.count("max_completion_tokens"));
  if (max_tokens.has_value() && max_completion_tokens.has_value()) {
    call.max_tokens = std::min(*max_tokens, *max_completion_tokens);
  } else {
    call.max_tokens = max_tokens.value_or(max_completion_tokens.value_or(0));
  }

  K3_ASSIGN_OR_RETURN(std::optional<bool> logprobs, f.boolean("logprobs"));
  call.logprobs = logprobs.value_or(false);
  K3_ASSIGN_OR_RETURN(std::optional<int64_t> top_logprobs, f.integer("top_logprobs"));
  if (top_logprobs.has_value()) {
    if (*top_logprobs < 0 || *top_logprobs > api::kMaxTopLogprobs)
      return invalid(cat("'top_logprobs' must be between 0 and ", api::kMaxTopLogprobs));
    if (!call.logprobs && *top_logprobs > 0)
      return invalid("'top_logprobs' needs 'logprobs': true");
    call.top_logprobs = static_cast<int>(*top_logprobs);
  }
  K3_ASSIGN_OR_RETURN(std::optional<bool> as_ids, f.boolean("return_tokens_as_token_ids"));
  call.tokens_as_ids = as_ids.value_or(false);
  return call;
}

json chat_completion_json(std::string_view id, int64_t created, std::string_view model,
                          const std::vector<ChoiceResult>& choices, const Usage& usage) {
  json out = base_object(id, created, model, "chat.completion");
  out["choices"] = json::array();
  for (size_t i = 0; i < choices.size(); ++i)
    out["choices"].push_back({{"index", i},
                              {"message", chat_message_json(choices[i].message)},
                              {"logprobs", chat_logprobs_json(choices[i].message.logprobs)},
                              {"finish_reason", finish_reason_name(choices[i].reason)}});
  out["usage"] = usage_json(usage);
  return out;
}

json chat_completion_json(std::string_view id, int64_t created, std::string_view model,
                          const OutputMessage& message, const Finish& finish) {
  return chat_completion_json(id, created, model, {ChoiceResult{message, finish.reason}},
                              finish.usage);
}

json chat_chunk_json(std::string_view id, int64_t created, std::string_view model,
                     const OutputDelta& delta, bool first) {
  json d = json::object();
  if (first) d["role"] = "assistant";
  if (!delta.reasoning_content.empty()) d["reasoning_content"] = delta.reasoning_content;
  if (!delta.content.empty() || (first && delta.tool_calls.empty())) d["content"] = delta.content;
  if (!delta.tool_calls.empty()) {
    json calls = json::array();
    for (const ToolCallOut& call : delta.tool_calls) {
      json c = {{"index", call.index}};
      json function = json::object();
      // A call's first delta carries its id and name (and the type).
      const bool opening = !call.id.empty() || !call.name.empty();
      if (!call.id.empty()) c["id"] = call.id;
      if (opening) c["type"] = "function";
      if (!call.name.empty()) function["name"] = call.name;
      function["arguments"] = call.arguments;
      c["function"] = std::move(function);
      calls.push_back(std::move(c));
    }
    d["tool_calls"] = std::move(calls);
  }
  json out = base_object(id, created, model, "chat.completion.chunk");
  out["choices"] = json::array({{{"index", delta.index},
                                 {"delta", std::move(d)},
                                 {"logprobs", chat_logprobs_json(delta.logprobs)},
                                 {"finish_reason", nullptr}}});
  return out;
}

json chat_finish_chunk_json(std::string_view id, int64_t created, std::string_view model,
                            FinishReason reason, int index) {
  json out = base_object(id, created, model, "chat.completion.chunk");
  out["choices"] = json::array({{{"index", index},
                                 {"delta", json::object()},
                                 {"logprobs", nullptr},
                                 {"finish_reason", finish_reason_name(reason)}}});
  return out;
}

}  // namespace k3::gateway
