#include "gateway/http/request_fields.h"

#include <algorithm>
#include <string>

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
      {"thinking", {"type"}},
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

// Refuses the first field of `obj` (when it is an object) that `kind` does
// not list; `where` is the object's path ("" for the body, "tools[0].").
Status only_listed(const ordered_json& obj, std::string_view kind, const std::string& where) {
  if (!obj.is_object()) return absl::OkStatus();
  const std::vector<std::string_view>& fields = object_named(kind).fields;
  for (auto it = obj.begin(); it != obj.end(); ++it) {
    if (it.value().is_null()) continue;
    if (std::find(fields.begin(), fields.end(), it.key()) != fields.end()) continue;
    const std::string path = where + it.key();
    return with_param(absl::InvalidArgumentError(
                          cat("'", path, "' is not a supported field (docs/openai-api.md lists ",
                              "the fields of ", kind, ")")),
                      path);
  }
  return absl::OkStatus();
}

// The value of `key` in `obj` when `obj` is an object and has it (not null).
const ordered_json* member(const ordered_json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(std::string(key));
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// Each object of the array `key` of `obj` (when it is an array) as `kind`.
template <typename F>
Status each_of(const ordered_json& obj, std::string_view key, const std::string& where, F&& fn) {
  const ordered_json* a = member(obj, key);
  if (a == nullptr || !a->is_array()) return absl::OkStatus();
  for (size_t i = 0; i < a->size(); ++i)
    K3_RETURN_IF_ERROR(fn((*a)[i], cat(where, key, "[", i, "].")));
  return absl::OkStatus();
}

// `obj`'s field `key` as `kind` (an object, or nothing to check).
Status nested(const ordered_json& obj, std::string_view key, std::string_view kind,
              const std::string& where) {
  const ordered_json* v = member(obj, key);
  return v == nullptr ? absl::OkStatus() : only_listed(*v, kind, cat(where, key, "."));
}

Status check_tool(const ordered_json& tool, const std::string& where) {
  K3_RETURN_IF_ERROR(only_listed(tool, "tools[]", where));
  return nested(tool, "function", "tools[].function", where);
}

// A 400 naming `message` (it starts with the field's quoted path).
Status bad_message_field(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

// Stricter than the renderer, which follows the reference: a message must
// be an object with a known role, and content parts must be text.
Status check_message(const ordered_json& m, const std::string& where) {
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
  K3_RETURN_IF_ERROR(only_listed(m, kind, where));
  K3_RETURN_IF_ERROR(
      each_of(m, "content", where, [](const ordered_json& part, const std::string& at) {
        return only_listed(part, "messages[].content[]", at);
      }));
  K3_RETURN_IF_ERROR(each_of(m, "tools", where, check_tool));
  return each_of(m, "tool_calls", where, [](const ordered_json& call, const std::string& at) {
    K3_RETURN_IF_ERROR(only_listed(call, "messages[].tool_calls[]", at));
    return nested(call, "function", "messages[].tool_calls[].function", at);
  });
}

Status check_chat(const ordered_json& body) {
  K3_RETURN_IF_ERROR(only_listed(body, kChat, ""));
  K3_RETURN_IF_ERROR(nested(body, "stream_options", "stream_options", ""));
  K3_RETURN_IF_ERROR(each_of(body, "messages", "", check_message));
  K3_RETURN_IF_ERROR(each_of(body, "tools", "", check_tool));
  if (const ordered_json* choice = member(body, "tool_choice"); choice != nullptr) {
    K3_RETURN_IF_ERROR(only_listed(*choice, "tool_choice", "tool_choice."));
    K3_RETURN_IF_ERROR(nested(*choice, "function", "tool_choice.function", "tool_choice."));
  }
  if (const ordered_json* format = member(body, "response_format"); format != nullptr) {
    K3_RETURN_IF_ERROR(only_listed(*format, "response_format", "response_format."));
    // A json_schema object without `schema` (or its alias `json_schema`) is
    // the schema itself: its keywords are the schema compiler's to check.
    const ordered_json* js = member(*format, "json_schema");
    if (js != nullptr &&
        (member(*js, "schema") != nullptr || member(*js, "json_schema") != nullptr))
      K3_RETURN_IF_ERROR(
          only_listed(*js, "response_format.json_schema", "response_format.json_schema."));
  }
  K3_RETURN_IF_ERROR(nested(body, "thinking", "thinking", ""));
  return nested(body, "chat_template_kwargs", "chat_template_kwargs", "");
}

}  // namespace

Status check_request_fields(std::string_view endpoint, const ordered_json& body) {
  if (endpoint == kChat) return check_chat(body);
  K3_RETURN_IF_ERROR(only_listed(body, object_named(endpoint).name, ""));
  if (endpoint == kCompletions) return nested(body, "stream_options", "stream_options", "");
  return absl::OkStatus();
}

}  // namespace k3::gateway
