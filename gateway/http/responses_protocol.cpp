#include "gateway/http/responses_protocol.h"

#include <algorithm>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "gateway/core/status_codes.h"
#include "gateway/http/common_fields.h"
#include "gateway/http/field_reader.h"
#include "shared/chat/xtml_render.h"

namespace k3::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// The body's fields (docs/responses-api.md): served, accepted with no
// effect, or refused below by name. Sampling beyond temperature/top_p and
// the seed are the chat API's extensions (vLLM's), served the same way.
const std::vector<std::string_view> kBodyFields = {
    "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls", "text",
    "reasoning", "max_output_tokens", "temperature", "top_p", "stream", "stream_options",
    // k3/vLLM extensions, as in chat completions.
    "seed", "top_k", "min_p", "repetition_penalty", "k3_expert_top_p",
    // Accepted, no effect.
    "store", "metadata", "include", "user", "safety_identifier", "prompt_cache_key",
    "prompt_cache_retention", "service_tier", "truncation", "background",
    // Refused by name.
    "previous_response_id", "conversation", "prompt", "top_logprobs", "max_tool_calls",
    "context_management"};

// A 400 naming `path` (OpenAI's error `param`).
Status refuse_at(const std::string& path, std::string message) {
  return with_param(invalid(cat("'", path, "' ", message)), path);
}

const ordered_json* member(const ordered_json& obj, std::string_view key) {
  auto it = obj.find(std::string(key));
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// A required string member.
StatusOr<std::string> required_string(const ordered_json& obj, std::string_view key,
                                      const std::string& where) {
  const ordered_json* v = member(obj, key);
  if (v == nullptr) return refuse_at(cat(where, key), "is required");
  if (!v->is_string()) return refuse_at(cat(where, key), "must be a string");
  return v->get<std::string>();
}

// Text content: a string, or text parts (input_text, output_text, text;
// refusal as its text) -> chat's text parts. Other parts (images, files,
// audio) are refused by name.
StatusOr<ordered_json> text_content(const ordered_json& content, const std::string& at,
                                    UnknownFields& unknown) {
  if (content.is_string()) return content;
  if (!content.is_array()) return refuse_at(at, "must be a string or an array of content parts");
  ordered_json parts = ordered_json::array();
  for (size_t p = 0; p < content.size(); ++p) {
    const ordered_json& part = content[p];
    const std::string where = cat(at, "[", p, "].");
    if (!part.is_object()) return refuse_at(cat(at, "[", p, "]"), "must be an object");
    K3_ASSIGN_OR_RETURN(std::string type, required_string(part, "type", where));
    const char* text_key = "text";
    if (type == "refusal") {
      text_key = "refusal";
    } else if (type != "input_text" && type != "output_text" && type != "text") {
      return refuse_at(cat(where, "type"), cat("'", type,
                                               "' is not supported: only text parts (input_text, "
                                               "output_text)"));
    }
    K3_RETURN_IF_ERROR(unknown.check_read_only(
        part, {"type", "text", "refusal", "annotations", "logprobs"}, "a content part", where));
    K3_ASSIGN_OR_RETURN(std::string text, required_string(part, text_key, where));
    parts.push_back({{"type", "text"}, {"text", std::move(text)}});
  }
  return parts;
}

// A reasoning item's text: its reasoning_text content, else its summaries,
// each part on its own paragraph.
StatusOr<std::string> reasoning_text(const ordered_json& item, const std::string& where,
                                     UnknownFields& unknown) {
  std::string out;
  for (const char* key : {"content", "summary"}) {
    const ordered_json* parts = member(item, key);
    if (parts == nullptr) continue;
    if (!parts->is_array()) return refuse_at(cat(where, key), "must be an array");
    for (size_t p = 0; p < parts->size(); ++p) {
      const std::string at = cat(where, key, "[", p, "].");
      const ordered_json& part = (*parts)[p];
      if (!part.is_object()) return refuse_at(cat(where, key, "[", p, "]"), "must be an object");
      K3_RETURN_IF_ERROR(unknown.check_read_only(part, {"type", "text"}, "a reasoning part", at));
      K3_ASSIGN_OR_RETURN(std::string text, required_string(part, "text", at));
      if (!out.empty()) out += "\n\n";
      out += text;
    }
    if (!out.empty()) break;  // content wins over the summary
  }
  return out;
}

// Input items -> chat messages. An assistant turn (a reasoning item, then a
// message and/or function_call items) becomes one assistant message with
// reasoning_content, content and tool_calls, as chat clients send it back;
// a function_call_output becomes a tool message naming its call.
class InputConverter {
 public:
  explicit InputConverter(UnknownFields& unknown) : unknown(unknown) {}

  Status add(const ordered_json& item, size_t i) {
    const std::string where = cat("input[", i, "].");
    if (!item.is_object()) return refuse_at(cat("input[", i, "]"), "must be an object");
    std::string type = "message";  // an item with a role and no type is a message
    if (const ordered_json* t = member(item, "type")) {
      if (!t->is_string()) return refuse_at(where + "type", "must be a string");
      type = t->get<std::string>();
    }
    if (type == "message") return add_message(item, where);
    if (type == "reasoning") return add_reasoning(item, where);
    if (type == "function_call") return add_function_call(item, where);
    if (type == "function_call_output") return add_function_output(item, where);
    if (type == "item_reference")
      return refuse_at(where + "type",
                       "'item_reference' is not supported: this server keeps no responses; "
                       "send the items themselves");
    return refuse_at(where + "type", cat("'", type,
                                         "' is not supported: message, reasoning, function_call or "
                                         "function_call_output"));
  }

  ordered_json take() { return std::move(messages_); }

 private:
  Status add_message(const ordered_json& item, const std::string& where) {
    K3_RETURN_IF_ERROR(unknown.check_read_only(item, {"type", "role", "content", "id", "status"},
                                               "a message item", where));
    K3_ASSIGN_OR_RETURN(std::string role, required_string(item, "role", where));
    if (role != "user" && role != "system" && role != "developer" && role != "assistant")
      return refuse_at(where + "role",
                       cat("'", role, "' is not supported: user, system, developer or assistant"));
    const ordered_json* content = member(item, "content");
    if (content == nullptr) return refuse_at(where + "content", "is required");
    K3_ASSIGN_OR_RETURN(ordered_json text, text_content(*content, where + "content", unknown));
    if (role != "assistant") {
      messages_.push_back({{"role", role}, {"content", std::move(text)}});
      return absl::OkStatus();
    }
    ordered_json& m = assistant(/*for_calls=*/false);
    if (text.is_string()) text = ordered_json::array({{{"type", "text"}, {"text", text}}});
    for (auto& part : text) m["content"].push_back(std::move(part));
    return absl::OkStatus();
  }

  Status add_reasoning(const ordered_json& item, const std::string& where) {
    K3_RETURN_IF_ERROR(unknown.check_read_only(
        item, {"type", "id", "summary", "content", "encrypted_content", "status"},
        "a reasoning item", where));
    K3_ASSIGN_OR_RETURN(std::string text, reasoning_text(item, where, unknown));
    if (!pending_reasoning_.empty() && !text.empty()) pending_reasoning_ += "\n\n";
    pending_reasoning_ += text;
    has_reasoning_ = true;
    return absl::OkStatus();
  }

  Status add_function_call(const ordered_json& item, const std::string& where) {
    K3_RETURN_IF_ERROR(
        unknown.check_read_only(item, {"type", "id", "call_id", "name", "arguments", "status"},
                                "a function_call item", where));
    K3_ASSIGN_OR_RETURN(std::string call_id, required_string(item, "call_id", where));
    K3_ASSIGN_OR_RETURN(std::string name, required_string(item, "name", where));
    K3_ASSIGN_OR_RETURN(std::string arguments, required_string(item, "arguments", where));
    ordered_json& m = assistant(/*for_calls=*/true);
    if (!m.contains("tool_calls")) m["tool_calls"] = ordered_json::array();
    m["tool_calls"].push_back(
        {{"id", call_id},
         {"type", "function"},
         {"function", {{"name", name}, {"arguments", std::move(arguments)}}}});
    call_names_[call_id] = name;
    return absl::OkStatus();
  }

  Status add_function_output(const ordered_json& item, const std::string& where) {
    K3_RETURN_IF_ERROR(unknown.check_read_only(item, {"type", "id", "call_id", "output", "status"},
                                               "a function_call_output item", where));
    K3_ASSIGN_OR_RETURN(std::string call_id, required_string(item, "call_id", where));
    auto name = call_names_.find(call_id);
    if (name == call_names_.end())
      return refuse_at(where + "call_id",
                       cat("'", call_id, "' names no earlier function_call item of the input"));
    const ordered_json* output = member(item, "output");
    if (output == nullptr) return refuse_at(where + "output", "is required");
    K3_ASSIGN_OR_RETURN(ordered_json content, text_content(*output, where + "output", unknown));
    messages_.push_back({{"role", "tool"},
                         {"tool_call_id", call_id},
                         {"name", name->second},
                         {"content", std::move(content)}});
    open_assistant_ = false;
    return absl::OkStatus();
  }

  // The assistant message the next output item belongs to: the open one
  // (the last message, an assistant turn being rebuilt) unless a reasoning
  // item starts a new turn or text follows tool calls; else a new one.
  ordered_json& assistant(bool for_calls) {
    bool reuse = open_assistant_ && !has_reasoning_;
    if (reuse && !for_calls && messages_.back().contains("tool_calls")) reuse = false;
    if (!reuse) {
      messages_.push_back({{"role", "assistant"}, {"content", ordered_json::array()}});
      open_assistant_ = true;
    }
    ordered_json& m = messages_.back();
    if (has_reasoning_) {
      m["reasoning_content"] = std::move(pending_reasoning_);
      pending_reasoning_.clear();
      has_reasoning_ = false;
    }
    return m;
  }

  UnknownFields& unknown;
  ordered_json messages_ = ordered_json::array();
  std::map<std::string, std::string> call_names_;  // call_id -> function name
  std::string pending_reasoning_;
  bool has_reasoning_ = false;
  bool open_assistant_ = false;  // the last message is an assistant turn being built
};

// Flat function tools ({"type": "function", "name", "description",
// "parameters", "strict"}) -> chat's {"type": "function", "function": {...}}.
StatusOr<ordered_json> convert_tools(const ordered_json& tools, UnknownFields& unknown) {
  if (!tools.is_array()) return refuse_at("tools", "must be an array");
  ordered_json out = ordered_json::array();
  for (size_t t = 0; t < tools.size(); ++t) {
    const ordered_json& tool = tools[t];
    const std::string where = cat("tools[", t, "].");
    if (!tool.is_object()) return refuse_at(cat("tools[", t, "]"), "must be an object");
    K3_ASSIGN_OR_RETURN(std::string type, required_string(tool, "type", where));
    if (type != "function")
      return refuse_at(where + "type", cat("'", type, "' is not supported: only function tools"));
    K3_RETURN_IF_ERROR(unknown.check_read_only(
        tool, {"type", "name", "description", "parameters", "strict"}, "a function tool", where));
    K3_ASSIGN_OR_RETURN(std::string name, required_string(tool, "name", where));
    ordered_json function = {{"name", std::move(name)}};
    if (const ordered_json* d = member(tool, "description")) {
      if (!d->is_string()) return refuse_at(where + "description", "must be a string");
      function["description"] = *d;
    }
    if (const ordered_json* p = member(tool, "parameters")) {
      if (!p->is_object()) return refuse_at(where + "parameters", "must be an object");
      function["parameters"] = *p;
    }
    if (const ordered_json* s = member(tool, "strict")) {
      if (!s->is_boolean()) return refuse_at(where + "strict", "must be a boolean");
      function["strict"] = *s;
    }
    out.push_back({{"type", "function"}, {"function", std::move(function)}});
  }
  return out;
}

// "none" | "auto" | "required" | {"type": "function", "name"} -> chat's.
StatusOr<ordered_json> convert_tool_choice(const ordered_json& choice, UnknownFields& unknown) {
  if (choice.is_string()) {
    const std::string& c = choice.get_ref<const std::string&>();
    if (c != "none" && c != "auto" && c != "required")
      return refuse_at("tool_choice", cat("'", c, "' is not supported: none, auto or required"));
    return choice;
  }
  if (!choice.is_object()) return refuse_at("tool_choice", "must be a string or an object");
  K3_ASSIGN_OR_RETURN(std::string type, required_string(choice, "type", "tool_choice."));
  if (type != "function")
    return refuse_at("tool_choice.type",
                     cat("'", type, "' is not supported: only {\"type\": \"function\", \"name\"}"));
  K3_RETURN_IF_ERROR(
      unknown.check_read_only(choice, {"type", "name"}, "tool_choice", "tool_choice."));
  K3_ASSIGN_OR_RETURN(std::string name, required_string(choice, "name", "tool_choice."));
  return ordered_json{{"type", "function"}, {"function", {{"name", std::move(name)}}}};
}

// text: {"format": {"type": "text" | "json_object" | "json_schema", ...},
// "verbosity"} -> chat's response_format (absent for text).
StatusOr<std::optional<ordered_json>> convert_text(const ordered_json& text,
                                                   UnknownFields& unknown) {
  if (!text.is_object()) return refuse_at("text", "must be an object");
  K3_RETURN_IF_ERROR(unknown.check_read_only(text, {"format", "verbosity"}, "text", "text."));
  if (const ordered_json* v = member(text, "verbosity"); v != nullptr && *v != "medium")
    return refuse_at("text.verbosity", "is not supported beyond \"medium\"");
  const ordered_json* format = member(text, "format");
  if (format == nullptr) return std::optional<ordered_json>();
  if (!format->is_object()) return refuse_at("text.format", "must be an object");
  K3_ASSIGN_OR_RETURN(std::string type, required_string(*format, "type", "text.format."));
  if (type == "text") {
    K3_RETURN_IF_ERROR(unknown.check_read_only(*format, {"type"}, "text.format", "text.format."));
    return std::optional<ordered_json>();
  }
  if (type == "json_object") {
    K3_RETURN_IF_ERROR(unknown.check_read_only(*format, {"type"}, "text.format", "text.format."));
    return std::optional<ordered_json>(ordered_json{{"type", "json_object"}});
  }
  if (type != "json_schema")
    return refuse_at("text.format.type",
                     cat("'", type, "' is not supported: text, json_object or json_schema"));
  K3_RETURN_IF_ERROR(unknown.check_read_only(
      *format, {"type", "name", "schema", "description", "strict"}, "text.format", "text.format."));
  const ordered_json* schema = member(*format, "schema");
  if (schema == nullptr) return refuse_at("text.format.schema", "is required");
  if (!schema->is_object()) return refuse_at("text.format.schema", "must be an object");
  ordered_json js = {{"schema", *schema}};
  if (const ordered_json* n = member(*format, "name")) {
    if (!n->is_string()) return refuse_at("text.format.name", "must be a string");
    js["name"] = *n;
  }
  if (const ordered_json* d = member(*format, "description")) {
    if (!d->is_string()) return refuse_at("text.format.description", "must be a string");
    js["description"] = *d;
  }
  if (const ordered_json* s = member(*format, "strict")) {
    if (!s->is_boolean()) return refuse_at("text.format.strict", "must be a boolean");
    js["strict"] = *s;
  }
  return std::optional<ordered_json>(
      ordered_json{{"type", "json_schema"}, {"json_schema", std::move(js)}});
}

// The fields this server cannot honour, refused by name; and the accepted
// ones type-checked.
Status refuse_unsupported(const FieldReader& f, UnknownFields& unknown) {
  for (const char* key : {"previous_response_id", "conversation"}) {
    if (f.get(key) != nullptr)
      return refuse_at(key,
                       "is not supported: this server keeps no responses; send the whole "
                       "conversation as input items");
  }
  for (const char* key : {"prompt", "max_tool_calls", "context_management"}) {
    if (f.get(key) != nullptr) return refuse_at(key, "is not supported");
  }
  K3_ASSIGN_OR_RETURN(std::optional<int64_t> top_logprobs, f.integer("top_logprobs"));
  if (top_logprobs.value_or(0) != 0)
    return refuse_at("top_logprobs", "is not supported on /v1/responses (chat completions has it)");
  K3_ASSIGN_OR_RETURN(std::optional<bool> background, f.boolean("background"));
  if (background.value_or(false))
    return refuse_at("background", "true is not supported: responses run in the foreground");
  K3_ASSIGN_OR_RETURN(std::optional<std::string> truncation, f.string("truncation"));
  if (truncation.has_value() && *truncation != "disabled")
    return refuse_at("truncation",
                     cat("'", *truncation,
                         "' is not supported: only \"disabled\" (a prompt over the context is "
                         "refused, never cut)"));
  K3_ASSIGN_OR_RETURN(std::optional<std::string> tier, f.string("service_tier"));
  if (tier.has_value() && *tier != "auto" && *tier != "default")
    return refuse_at("service_tier", cat("'", *tier, "' is not supported: auto or default"));
  K3_RETURN_IF_ERROR(f.boolean("store").status());
  if (const ordered_json* m = f.get("metadata"); m != nullptr && !m->is_object())
    return refuse_at("metadata", "must be an object");
  if (const ordered_json* include = f.get("include")) {
    if (!include->is_array()) return refuse_at("include", "must be an array of strings");
    for (size_t i = 0; i < include->size(); ++i) {
      const ordered_json& v = (*include)[i];
      if (!v.is_string()) return refuse_at(cat("include[", i, "]"), "must be a string");
      if (v == "message.output_text.logprobs")
        return refuse_at(cat("include[", i, "]"),
                         "'message.output_text.logprobs' is not supported on /v1/responses");
    }
  }
  if (const ordered_json* so = f.get("stream_options")) {
    if (!so->is_object()) return refuse_at("stream_options", "must be an object");
    K3_RETURN_IF_ERROR(
        unknown.check_read_only(*so, {"include_obfuscation"}, "stream_options", "stream_options."));
  }
  for (const char* key : {"safety_identifier", "prompt_cache_key", "prompt_cache_retention"})
    K3_RETURN_IF_ERROR(f.string(key).status());
  return absl::OkStatus();
}

// reasoning: {"effort", "summary", "generate_summary"} -> render's
// reasoning_effort (the summary settings are accepted: K3 returns its
// reasoning itself, never a summary).
Status parse_reasoning(const FieldReader& f, ResponsesCall& call, UnknownFields& unknown) {
  K3_ASSIGN_OR_RETURN(std::optional<FieldReader> reasoning, f.object("reasoning"));
  json echo = {{"effort", nullptr}, {"summary", nullptr}};
  if (reasoning.has_value()) {
    const ordered_json& r = *f.get("reasoning");
    K3_RETURN_IF_ERROR(unknown.check_read_only(r, {"effort", "summary", "generate_summary"},
                                               "reasoning", "reasoning."));
    K3_RETURN_IF_ERROR(reasoning->string("summary").status());
    K3_RETURN_IF_ERROR(reasoning->string("generate_summary").status());
    K3_ASSIGN_OR_RETURN(std::optional<std::string> effort, reasoning->string("effort"));
    if (effort.has_value()) {
      K3_ASSIGN_OR_RETURN(std::string mapped, responses_effort(*effort));
      call.chat.render["reasoning_effort"] = std::move(mapped);
      echo["effort"] = *effort;
    }
    if (const ordered_json* s = member(r, "summary")) echo["summary"] = *s;
  }
  call.echo["reasoning"] = std::move(echo);
  return chat::chat_options(call.chat.render).status();
}

}  // namespace

const std::vector<std::string_view>& responses_body_fields() {
  return kBodyFields;
}

StatusOr<std::string> responses_effort(std::string_view effort) {
  if (effort == "none") return std::string("none");
  if (effort == "minimal" || effort == "low") return std::string("low");
  if (effort == "medium" || effort == "high") return std::string("high");
  if (effort == "xhigh" || effort == "max") return std::string("max");
  return refuse_at(
      "reasoning.effort",
      cat("'", effort, "' is not supported: none, minimal, low, medium, high, xhigh or max"));
}

StatusOr<ResponsesCall> parse_responses_request(std::string_view body) {
  UnknownFields strict(UnknownFieldPolicy::kRefuse, "docs/responses-api.md");
  return parse_responses_request(body, strict);
}

StatusOr<ResponsesCall> parse_responses_request(std::string_view body, UnknownFields& unknown) {
  K3_ASSIGN_OR_RETURN(const ordered_json request, parse_body(body));
  K3_RETURN_IF_ERROR(unknown.check_read_only(request, kBodyFields, "/v1/responses", ""));
  const FieldReader f(request);
  K3_RETURN_IF_ERROR(refuse_unsupported(f, unknown));
  ResponsesCall call;
  ChatCall& chat = call.chat;
  K3_RETURN_IF_ERROR(parse_common_into(f, chat));
  chat.include_usage = false;  // usage is in response.completed

  // instructions -> a system message ahead of the input.
  ordered_json messages = ordered_json::array();
  K3_ASSIGN_OR_RETURN(std::optional<std::string> instructions, f.string("instructions"));
  if (instructions.has_value())
    messages.push_back({{"role", "system"}, {"content", *instructions}});
  call.echo["instructions"] = instructions.has_value() ? json(*instructions) : json(nullptr);

  const ordered_json* input = f.get("input");
  if (input == nullptr) return refuse_at("input", "is required");
  if (input->is_string()) {
    messages.push_back({{"role", "user"}, {"content", *input}});
  } else if (input->is_array()) {
    if (input->empty()) return refuse_at("input", "must not be empty");
    InputConverter converter(unknown);
    for (size_t i = 0; i < input->size(); ++i) K3_RETURN_IF_ERROR(converter.add((*input)[i], i));
    for (auto& m : converter.take()) messages.push_back(std::move(m));
  } else {
    return refuse_at("input", "must be a string or an array of input items");
  }
  chat.render["messages"] = std::move(messages);

  call.echo["tools"] = json::array();
  if (const ordered_json* tools = f.get("tools")) {
    K3_ASSIGN_OR_RETURN(ordered_json converted, convert_tools(*tools, unknown));
    if (!converted.empty()) chat.render["tools"] = std::move(converted);
    call.echo["tools"] = json::parse(tools->dump());
  }
  call.echo["tool_choice"] = "auto";
  if (const ordered_json* choice = f.get("tool_choice")) {
    K3_ASSIGN_OR_RETURN(chat.render["tool_choice"], convert_tool_choice(*choice, unknown));
    call.echo["tool_choice"] = json::parse(choice->dump());
  }
  K3_ASSIGN_OR_RETURN(std::optional<bool> parallel, f.boolean("parallel_tool_calls"));
  chat.parallel_tool_calls = parallel.value_or(true);
  call.echo["parallel_tool_calls"] = chat.parallel_tool_calls;

  call.echo["text"] = {{"format", {{"type", "text"}}}};
  if (const ordered_json* text = f.get("text")) {
    K3_ASSIGN_OR_RETURN(std::optional<ordered_json> format, convert_text(*text, unknown));
    if (format.has_value()) chat.render["response_format"] = std::move(*format);
    if (const ordered_json* fmt = member(*text, "format"))
      call.echo["text"]["format"] = json::parse(fmt->dump());
  }
  K3_RETURN_IF_ERROR(parse_reasoning(f, call, unknown));

  K3_ASSIGN_OR_RETURN(std::optional<int64_t> max_output_tokens, f.count("max_output_tokens"));
  chat.max_tokens = max_output_tokens.value_or(0);
  call.echo["max_output_tokens"] =
      max_output_tokens.has_value() ? json(*max_output_tokens) : json(nullptr);
  call.echo["temperature"] =
      chat.sampling.temperature ? json(*chat.sampling.temperature) : json(nullptr);
  call.echo["top_p"] = chat.sampling.top_p ? json(*chat.sampling.top_p) : json(nullptr);
  call.echo["truncation"] = "disabled";
  call.echo["store"] = false;  // nothing is kept, whatever was asked
  call.echo["metadata"] = json::object();
  if (const ordered_json* m = f.get("metadata")) call.echo["metadata"] = json::parse(m->dump());
  K3_ASSIGN_OR_RETURN(std::optional<std::string> user, f.string("user"));
  call.echo["user"] = user.has_value() ? json(*user) : json(nullptr);
  K3_ASSIGN_OR_RETURN(std::optional<std::string> tier, f.string("service_tier"));
  call.echo["service_tier"] = tier.value_or("default");
  return call;
}

const char* response_status_name(ResponseStatus s) {
  switch (s) {
    case ResponseStatus::kInProgress:
      return "in_progress";
    case ResponseStatus::kCompleted:
      return "completed";
    case ResponseStatus::kIncomplete:
      return "incomplete";
    case ResponseStatus::kFailed:
      return "failed";
  }
  return "failed";
}

json responses_usage_json(const Usage& usage, int64_t reasoning_tokens) {
  return {{"input_tokens", usage.prompt_tokens},
          {"input_tokens_details", {{"cached_tokens", usage.cached_tokens}}},
          {"output_tokens", usage.completion_tokens},
          {"output_tokens_details", {{"reasoning_tokens", reasoning_tokens}}},
          {"total_tokens", usage.prompt_tokens + usage.completion_tokens},
          {"k3_restored_tokens", usage.restored_tokens}};
}

json response_json(const ResponseHead& head, ResponseStatus status, const json& output,
                   const json& usage, const json& error) {
  json r = {{"id", head.id},
            {"object", "response"},
            {"created_at", head.created_at},
            {"status", response_status_name(status)},
            {"background", false},
            {"error", status == ResponseStatus::kFailed ? error : json(nullptr)},
            {"incomplete_details", status == ResponseStatus::kIncomplete
                                       ? json{{"reason", "max_output_tokens"}}
                                       : json(nullptr)},
            {"model", head.model},
            {"output", output},
            {"previous_response_id", nullptr},
            {"usage", usage}};
  for (const auto& [key, value] : head.echo.items()) r[key] = value;
  return r;
}

}  // namespace k3::gateway
