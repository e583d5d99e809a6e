#include "gateway/http/request_fields.h"

#include <algorithm>
#include <string>
#include <utility>

#include "gateway/core/status_codes.h"

namespace k3::gateway {

using nlohmann::ordered_json;

namespace {

constexpr std::string_view kChat = "/v1/chat/completions";
constexpr std::string_view kCompletions = "/v1/completions";

}  // namespace

const std::vector<RequestObject>& request_objects() {
  static const std::vector<RequestObject> kObjects = {
      {kChat,
       {"messages",
        "model",
        "max_tokens",
        "max_completion_tokens",
        "temperature",
        "top_p",
        "seed",
        "logit_bias",
        "presence_penalty",
        "frequency_penalty",
        "logprobs",
        "top_logprobs",
        "stop",
        "stream",
        "stream_options",
        "n",
        "reasoning_effort",
        "user",
        "safety_identifier",
        "prompt_cache_key",
        "service_tier",
        "store",
        "metadata",
        "modalities",
        "audio",
        "prediction",
        "functions",
        "function_call",
        "web_search_options",
        "verbosity",
        "response_format",
        "tools",
        "tool_choice",
        "parallel_tool_calls",
        "top_k",
        "min_p",
        "repetition_penalty",
        "return_tokens_as_token_ids",
        "thinking",
        "enable_thinking",
        "chat_template_kwargs",
        "thinking_effort",
        "k3_expert_top_p"}},
      {kCompletions,
       {"prompt",
        "model",
        "max_tokens",
        "temperature",
        "top_p",
        "seed",
        "logit_bias",
        "presence_penalty",
        "frequency_penalty",
        "logprobs",
        "echo",
        "stop",
        "stream",
        "stream_options",
        "n",
        "best_of",
        "suffix",
        "user",
        "top_k",
        "min_p",
        "repetition_penalty",
        "return_tokens_as_token_ids",
        "k3_expert_top_p"}},
      {"/tokenize", {"content"}},
      {"/detokenize", {"tokens"}},
      {"stream_options", {"include_usage"}},
      {"messages[] (system, developer)", {"role", "content", "name", "tools"}},
      {"messages[] (user)", {"role", "content", "name"}},
      {"messages[] (assistant)",
       {"role", "content", "name", "reasoning_content", "reasoning", "tool_calls"}},
      {"messages[] (tool)", {"role", "content", "tool_call_id", "id", "tool", "name"}},
      {"messages[].content[]", {"type", "text"}},
      {"messages[].tool_calls[]", {"id", "type", "function"}},
      {"messages[].tool_calls[].function", {"name", "arguments"}},
      {"tools[]", {"type", "function"}},
      {"tools[].function", {"name", "description", "parameters", "strict"}},
      {"tool_choice", {"type", "function"}},
      {"tool_choice.function", {"name"}},
      {"response_format", {"type", "json_schema"}},
      {"response_format.json_schema", {"name", "description", "schema", "strict", "json_schema"}},
      {"thinking", {"type", "budget_tokens"}},
      {"chat_template_kwargs", {"enable_thinking", "thinking", "thinking_effort"}},
  };
  return kObjects;
}

namespace {

const RequestObject& object_named(std::string_view name) {
  for (const RequestObject& o : request_objects())
    if (o.name == name) return o;
  // A name missing from the table is a bug here, not bad input.
  __builtin_trap();
}

// Checks the fields of `obj` (when it is an object) against `kind`'s list;
// `where` is the object's path ("" for the body, "tools[0].").
Status only_listed(ordered_json& obj, std::string_view kind, const std::string& where,
                   UnknownFields& unknown) {
  return unknown.check(obj, object_named(kind).fields, kind, where);
}

// The value of `key` in `obj` when `obj` is an object and has it (not null).
const ordered_json* member(const ordered_json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(std::string(key));
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}
ordered_json* member(ordered_json& obj, std::string_view key) {
  return const_cast<ordered_json*>(member(std::as_const(obj), key));
}

// Each element of the array `key` of `obj` (when it is an array), with its path.
template <typename F>
Status each_of(ordered_json& obj, std::string_view key, const std::string& where, F&& fn) {
  ordered_json* a = member(obj, key);
  if (a == nullptr || !a->is_array()) return absl::OkStatus();
  for (size_t i = 0; i < a->size(); ++i)
    K3_RETURN_IF_ERROR(fn((*a)[i], cat(where, key, "[", i, "].")));
  return absl::OkStatus();
}

// `obj`'s field `key` as `kind` (an object, or nothing to check).
Status nested(ordered_json& obj, std::string_view key, std::string_view kind,
              const std::string& where, UnknownFields& unknown) {
  ordered_json* v = member(obj, key);
  return v == nullptr ? absl::OkStatus() : only_listed(*v, kind, cat(where, key, "."), unknown);
}

Status check_tool(ordered_json& tool, const std::string& where, UnknownFields& unknown) {
  K3_RETURN_IF_ERROR(only_listed(tool, "tools[]", where, unknown));
  return nested(tool, "function", "tools[].function", where, unknown);
}

// A 400 naming `message` (it starts with the field's quoted path).
Status bad_message_field(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

// Stricter than the renderer, which follows the reference: a message must
// be an object with a known role, and content parts must be text.
Status check_message(ordered_json& m, const std::string& where, UnknownFields& unknown) {
  const std::string at = where.substr(0, where.size() - 1);  // "messages[2]"
  if (!m.is_object()) return bad_message_field(cat("'", at, "' must be an object"));
  const ordered_json* role = member(m, "role");
  if (role == nullptr) return bad_message_field(cat("'", where, "role' is required"));
  if (!role->is_string()) return bad_message_field(cat("'", where, "role' must be a string"));
  const std::string& r = role->get_ref<const std::string&>();
  std::string_view kind;
  if (r == "system" || r == "developer") {
    kind = "messages[] (system, developer)";
  } else if (r == "user") {
    kind = "messages[] (user)";
  } else if (r == "assistant") {
    kind = "messages[] (assistant)";
  } else if (r == "tool") {
    kind = "messages[] (tool)";
  } else {
    return bad_message_field(cat("'", where, "role' '", r,
                                 "' is not supported: system, developer, user, assistant or tool"));
  }
  if (const ordered_json* content = member(m, "content"); content != nullptr) {
    if (!content->is_string() && !content->is_array()) {
      return bad_message_field(cat("'", where, "content' must be a string or an array of parts"));
    }
    if (content->is_array()) {
      for (size_t p = 0; p < content->size(); ++p) {
        const ordered_json& part = (*content)[p];
        const ordered_json* type = member(part, "type");
        if (!part.is_object() || type == nullptr || *type != "text") {
          return bad_message_field(cat("'", where, "content[", p,
                                       "]' is not supported: only text parts ({\"type\": \"text\", "
                                       "\"text\": ...})"));
        }
        const ordered_json* text = member(part, "text");
        if (text == nullptr || !text->is_string()) {
          return bad_message_field(cat("'", where, "content[", p, "].text' must be a string"));
        }
      }
    }
  }
  K3_RETURN_IF_ERROR(only_listed(m, kind, where, unknown));
  K3_RETURN_IF_ERROR(each_of(m, "content", where, [&](ordered_json& part, const std::string& at) {
    return only_listed(part, "messages[].content[]", at, unknown);
  }));
  K3_RETURN_IF_ERROR(each_of(m, "tools", where, [&](ordered_json& tool, const std::string& at) {
    return check_tool(tool, at, unknown);
  }));
  return each_of(m, "tool_calls", where, [&](ordered_json& call, const std::string& at) {
    K3_RETURN_IF_ERROR(only_listed(call, "messages[].tool_calls[]", at, unknown));
    return nested(call, "function", "messages[].tool_calls[].function", at, unknown);
  });
}

Status check_chat(ordered_json& body, UnknownFields& unknown) {
  K3_RETURN_IF_ERROR(only_listed(body, kChat, "", unknown));
  K3_RETURN_IF_ERROR(nested(body, "stream_options", "stream_options", "", unknown));
  K3_RETURN_IF_ERROR(each_of(body, "messages", "", [&](ordered_json& m, const std::string& at) {
    return check_message(m, at, unknown);
  }));
  K3_RETURN_IF_ERROR(each_of(body, "tools", "", [&](ordered_json& tool, const std::string& at) {
    return check_tool(tool, at, unknown);
  }));
  if (ordered_json* choice = member(body, "tool_choice"); choice != nullptr) {
    K3_RETURN_IF_ERROR(only_listed(*choice, "tool_choice", "tool_choice.", unknown));
    K3_RETURN_IF_ERROR(
        nested(*choice, "function", "tool_choice.function", "tool_choice.", unknown));
  }
  if (ordered_json* format = member(body, "response_format"); format != nullptr) {
    K3_RETURN_IF_ERROR(only_listed(*format, "response_format", "response_format.", unknown));
    // A json_schema object without `schema` (or its alias `json_schema`) is
    // the schema itself: its keywords are the schema compiler's to check.
    ordered_json* js = member(*format, "json_schema");
    if (js != nullptr &&
        (member(*js, "schema") != nullptr || member(*js, "json_schema") != nullptr))
      K3_RETURN_IF_ERROR(
          only_listed(*js, "response_format.json_schema", "response_format.json_schema.", unknown));
  }
  K3_RETURN_IF_ERROR(nested(body, "thinking", "thinking", "", unknown));
  return nested(body, "chat_template_kwargs", "chat_template_kwargs", "", unknown);
}

}  // namespace

Status check_request_fields(std::string_view endpoint, ordered_json& body, UnknownFields& unknown) {
  if (endpoint == kChat) return check_chat(body, unknown);
  K3_RETURN_IF_ERROR(only_listed(body, object_named(endpoint).name, "", unknown));
  if (endpoint == kCompletions)
    return nested(body, "stream_options", "stream_options", "", unknown);
  return absl::OkStatus();
}

}  // namespace k3::gateway
