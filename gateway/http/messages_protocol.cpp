#include "gateway/http/messages_protocol.h"

#include <algorithm>
#include <string>
#include <utility>
#include <vector>

#include "gateway/core/json_text.h"
#include "gateway/core/status_codes.h"
#include "gateway/http/field_reader.h"

namespace k3::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;
using Fields = std::vector<std::string_view>;

// The fields of each object, as docs/messages-api.md lists them (served,
// ignored or refused by name); a field not listed is unknown (UnknownFields:
// ignored and named, or refused under --strict-fields).
const Fields kCreateFields = {"model",           "messages",
                              "max_tokens",      "system",
                              "stop_sequences",  "stream",
                              "temperature",     "top_p",
                              "top_k",           "tools",
                              "tool_choice",     "thinking",
                              "output_config",   "metadata",
                              "service_tier",    "cache_control",
                              "inference_geo",   "speed",
                              "user_profile_id", "container",
                              "mcp_servers",     "context_management",
                              "diagnostics",     "seed",
                              "k3_expert_top_p"};
const Fields kCountFields = {"model",       "messages",          "system",        "tools",
                             "tool_choice", "thinking",          "output_config", "cache_control",
                             "mcp_servers", "context_management"};
// Refused by name: what this server does not do.
const Fields kRefusedFields = {"container", "mcp_servers", "context_management", "diagnostics"};
const Fields kTextBlockFields = {"type", "text", "cache_control", "citations"};
const Fields kToolUseFields = {"type", "id", "name", "input", "cache_control", "caller"};
const Fields kToolResultFields = {"type", "tool_use_id", "content", "is_error", "cache_control"};
const Fields kThinkingBlockFields = {"type", "thinking", "signature"};
const Fields kRedactedThinkingFields = {"type", "data"};
const Fields kToolFields = {
    "type",   "name",          "description",    "input_schema",          "cache_control",
    "strict", "defer_loading", "input_examples", "eager_input_streaming", "allowed_callers"};
const Fields kToolChoiceFields = {"type", "name", "disable_parallel_tool_use"};
const Fields kThinkingFields = {"type", "budget_tokens", "display"};
const Fields kOutputConfigFields = {"effort", "format"};
const Fields kOutputFormatFields = {"type", "schema"};
const Fields kMetadataFields = {"user_id"};

// 400 naming `path` in the message and the error's param.
Status bad(const std::string& path, std::string message) {
  return with_param(invalid(std::move(message)), path);
}

// A non-null member of an object.
const ordered_json* member(const ordered_json& obj, std::string_view key) {
  auto it = obj.find(std::string(key));
  if (it == obj.end() || it->is_null()) return nullptr;
  return &*it;
}

// A block's "type" string, or 400.
StatusOr<std::string> block_type(const ordered_json& block, const std::string& at) {
  if (!block.is_object()) return bad(at, cat("'", at, "' must be an object"));
  const ordered_json* type = member(block, "type");
  if (type == nullptr || !type->is_string())
    return bad(at + ".type", cat("'", at, ".type' must be a string"));
  return type->get<std::string>();
}

// A required string member.
StatusOr<std::string> string_member(const ordered_json& obj, std::string_view key,
                                    const std::string& at) {
  const ordered_json* v = member(obj, key);
  const std::string path = cat(at, ".", key);
  if (v == nullptr) return bad(path, cat("'", path, "' is required"));
  if (!v->is_string()) return bad(path, cat("'", path, "' must be a string"));
  return v->get<std::string>();
}

// A text block's text (its fields checked).
StatusOr<std::string> text_block(const ordered_json& block, const std::string& at,
                                 UnknownFields& unknown) {
  K3_RETURN_IF_ERROR(unknown.check_read_only(block, kTextBlockFields, "a text block", at + "."));
  return string_member(block, "text", at);
}

// A string or an array of text blocks, as one text (blocks joined by "\n").
StatusOr<std::string> text_or_blocks(const ordered_json& v, const std::string& at,
                                     UnknownFields& unknown) {
  if (v.is_string()) return v.get<std::string>();
  if (!v.is_array()) return bad(at, cat("'", at, "' must be a string or an array of text blocks"));
  std::string out;
  for (size_t i = 0; i < v.size(); ++i) {
    const std::string b = cat(at, "[", i, "]");
    K3_ASSIGN_OR_RETURN(std::string type, block_type(v[i], b));
    if (type != "text")
      return bad(b + ".type", cat("'", b, ".type' '", type, "' is not supported here: only text"));
    K3_ASSIGN_OR_RETURN(std::string text, text_block(v[i], b, unknown));
    if (i > 0) out += "\n";
    out += text;
  }
  return out;
}

// One user message as chat messages: its tool_result blocks as tool
// messages, its text blocks (in order, between them) as user messages.
Status convert_user(const ordered_json& content, const std::string& at, ordered_json& out,
                    UnknownFields& unknown) {
  if (content.is_string()) {
    out.push_back({{"role", "user"}, {"content", content}});
    return absl::OkStatus();
  }
  ordered_json parts = ordered_json::array();
  auto flush = [&] {
    if (parts.empty()) return;
    out.push_back({{"role", "user"}, {"content", std::move(parts)}});
    parts = ordered_json::array();
  };
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string b = cat(at, "[", i, "]");
    const ordered_json& block = content[i];
    K3_ASSIGN_OR_RETURN(std::string type, block_type(block, b));
    if (type == "text") {
      K3_ASSIGN_OR_RETURN(std::string text, text_block(block, b, unknown));
      parts.push_back({{"type", "text"}, {"text", std::move(text)}});
    } else if (type == "tool_result") {
      K3_RETURN_IF_ERROR(
          unknown.check_read_only(block, kToolResultFields, "a tool_result block", b + "."));
      K3_ASSIGN_OR_RETURN(std::string id, string_member(block, "tool_use_id", b));
      std::string text;
      if (const ordered_json* c = member(block, "content")) {
        K3_ASSIGN_OR_RETURN(text, text_or_blocks(*c, b + ".content", unknown));
      }
      if (const ordered_json* e = member(block, "is_error"); e != nullptr && !e->is_boolean())
        return bad(b + ".is_error", cat("'", b, ".is_error' must be a boolean"));
      flush();
      out.push_back({{"role", "tool"}, {"tool_call_id", std::move(id)}, {"content", text}});
    } else {
      return bad(b + ".type", cat("'", b, ".type' '", type,
                                  "' is not supported in a user message: text or tool_result"));
    }
  }
  flush();
  return absl::OkStatus();
}

// One assistant message: text -> content, thinking -> reasoning_content,
// tool_use -> tool_calls; redacted_thinking is dropped (nothing to render).
Status convert_assistant(const ordered_json& content, const std::string& at, ordered_json& out,
                         UnknownFields& unknown) {
  ordered_json m = {{"role", "assistant"}};
  if (content.is_string()) {
    m["content"] = content;
    out.push_back(std::move(m));
    return absl::OkStatus();
  }
  std::string text, reasoning;
  ordered_json calls = ordered_json::array();
  for (size_t i = 0; i < content.size(); ++i) {
    const std::string b = cat(at, "[", i, "]");
    const ordered_json& block = content[i];
    K3_ASSIGN_OR_RETURN(std::string type, block_type(block, b));
    if (type == "text") {
      K3_ASSIGN_OR_RETURN(std::string t, text_block(block, b, unknown));
      text += t;
    } else if (type == "thinking") {
      K3_RETURN_IF_ERROR(
          unknown.check_read_only(block, kThinkingBlockFields, "a thinking block", b + "."));
      K3_ASSIGN_OR_RETURN(std::string t, string_member(block, "thinking", b));
      reasoning += t;
    } else if (type == "redacted_thinking") {
      K3_RETURN_IF_ERROR(unknown.check_read_only(block, kRedactedThinkingFields,
                                                 "a redacted_thinking block", b + "."));
    } else if (type == "tool_use") {
      K3_RETURN_IF_ERROR(
          unknown.check_read_only(block, kToolUseFields, "a tool_use block", b + "."));
      K3_ASSIGN_OR_RETURN(std::string id, string_member(block, "id", b));
      K3_ASSIGN_OR_RETURN(std::string name, string_member(block, "name", b));
      const ordered_json* input = member(block, "input");
      if (input == nullptr || !input->is_object())
        return bad(b + ".input", cat("'", b, ".input' must be an object"));
      calls.push_back({{"id", std::move(id)},
                       {"type", "function"},
                       {"function", {{"name", std::move(name)}, {"arguments", *input}}}});
    } else {
      return bad(b + ".type", cat("'", b, ".type' '", type,
                                  "' is not supported in an assistant message: text, thinking, "
                                  "redacted_thinking or tool_use"));
    }
  }
  m["content"] = std::move(text);
  if (!reasoning.empty()) m["reasoning_content"] = std::move(reasoning);
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  out.push_back(std::move(m));
  return absl::OkStatus();
}

Status convert_messages(const ordered_json* messages, ordered_json& out, UnknownFields& unknown) {
  if (messages == nullptr) return bad("messages", "'messages' is required");
  if (!messages->is_array()) return bad("messages", "'messages' must be an array");
  if (messages->empty()) return bad("messages", "'messages' must not be empty");
  for (size_t i = 0; i < messages->size(); ++i) {
    const std::string at = cat("messages[", i, "]");
    const ordered_json& m = (*messages)[i];
    if (!m.is_object()) return bad(at, cat("'", at, "' must be an object"));
    K3_RETURN_IF_ERROR(unknown.check_read_only(m, {"role", "content"}, "a message", at + "."));
    K3_ASSIGN_OR_RETURN(std::string role, string_member(m, "role", at));
    const ordered_json* content = member(m, "content");
    if (content == nullptr) return bad(at + ".content", cat("'", at, ".content' is required"));
    if (!content->is_string() && !content->is_array())
      return bad(at + ".content",
                 cat("'", at, ".content' must be a string or an array of content blocks"));
    if (role == "user") {
      K3_RETURN_IF_ERROR(convert_user(*content, at + ".content", out, unknown));
    } else if (role == "assistant") {
      K3_RETURN_IF_ERROR(convert_assistant(*content, at + ".content", out, unknown));
    } else {
      return bad(at + ".role", cat("'", at, ".role' '", role, "' is not user or assistant"));
    }
  }
  return absl::OkStatus();
}

// Anthropic's tools as function tools (only custom tools: Anthropic's
// server and client tools run on Anthropic's side).
StatusOr<ordered_json> convert_tools(const ordered_json& tools, UnknownFields& unknown) {
  if (!tools.is_array()) return bad("tools", "'tools' must be an array");
  ordered_json out = ordered_json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string at = cat("tools[", i, "]");
    const ordered_json& t = tools[i];
    if (!t.is_object()) return bad(at, cat("'", at, "' must be an object"));
    if (const ordered_json* type = member(t, "type"); type != nullptr && *type != "custom")
      return bad(at + ".type", cat("'", at, ".type' ", type->dump(),
                                   " is not supported: only custom tools (name, input_schema)"));
    K3_RETURN_IF_ERROR(unknown.check_read_only(t, kToolFields, "a tool", at + "."));
    K3_ASSIGN_OR_RETURN(std::string name, string_member(t, "name", at));
    ordered_json fn = {{"name", std::move(name)}};
    if (const ordered_json* d = member(t, "description")) {
      if (!d->is_string())
        return bad(at + ".description", cat("'", at, ".description' must be a string"));
      fn["description"] = *d;
    }
    const ordered_json* schema = member(t, "input_schema");
    if (schema == nullptr || !schema->is_object())
      return bad(at + ".input_schema", cat("'", at, ".input_schema' must be an object"));
    fn["parameters"] = *schema;
    out.push_back({{"type", "function"}, {"function", std::move(fn)}});
  }
  return out;
}

// tool_choice into the chat route's: auto, required (any), the named
// function (tool), none; disable_parallel_tool_use -> at most one call.
Status convert_tool_choice(const ordered_json& choice, ChatCall& call, UnknownFields& unknown) {
  if (!choice.is_object()) return bad("tool_choice", "'tool_choice' must be an object");
  K3_RETURN_IF_ERROR(
      unknown.check_read_only(choice, kToolChoiceFields, "tool_choice", "tool_choice."));
  K3_ASSIGN_OR_RETURN(std::string type, string_member(choice, "type", "tool_choice"));
  if (type == "auto") {
    call.render["tool_choice"] = "auto";
  } else if (type == "any") {
    call.render["tool_choice"] = "required";
  } else if (type == "none") {
    call.render["tool_choice"] = "none";
  } else if (type == "tool") {
    K3_ASSIGN_OR_RETURN(std::string name, string_member(choice, "name", "tool_choice"));
    call.render["tool_choice"] = {{"type", "function"}, {"function", {{"name", std::move(name)}}}};
  } else {
    return bad("tool_choice.type",
               cat("'tool_choice.type' '", type, "' is not auto, any, tool or none"));
  }
  if (const ordered_json* p = member(choice, "disable_parallel_tool_use")) {
    if (!p->is_boolean())
      return bad("tool_choice.disable_parallel_tool_use",
                 "'tool_choice.disable_parallel_tool_use' must be a boolean");
    call.parallel_tool_calls = !p->get<bool>();
  }
  return absl::OkStatus();
}

// thinking and output_config.effort into the renderer's options: thinking
// off unless enabled (or adaptive); the effort from output_config.effort,
// else from budget_tokens; budget_tokens also the engine's hard limit on
// thinking tokens (ChatCall::thinking_budget).
Status convert_thinking(const FieldReader& f, MessagesCall& out, bool need_budget_room,
                        UnknownFields& unknown) {
  bool thinking = false;
  std::optional<std::string> effort;
  if (const ordered_json* t = f.get("thinking")) {
    if (!t->is_object()) return bad("thinking", "'thinking' must be an object");
    K3_RETURN_IF_ERROR(unknown.check_read_only(*t, kThinkingFields, "thinking", "thinking."));
    K3_ASSIGN_OR_RETURN(std::string type, string_member(*t, "type", "thinking"));
    if (const ordered_json* d = member(*t, "display");
        d != nullptr && *d != "summarized" && *d != "omitted")
      return bad("thinking.display", "'thinking.display' must be \"summarized\" or \"omitted\"");
    if (type == "enabled") {
      thinking = true;
      const ordered_json* b = member(*t, "budget_tokens");
      if (b == nullptr)
        return bad("thinking.budget_tokens", "'thinking.budget_tokens' is required");
      // At least kMinThinkingBudget, below max_tokens (as Anthropic).
      if (!b->is_number_integer() || b->get<int64_t>() < kMinThinkingBudget)
        return bad(
            "thinking.budget_tokens",
            cat("'thinking.budget_tokens' must be an integer of at least ", kMinThinkingBudget));
      out.chat.thinking_budget = b->get<int64_t>();
      if (need_budget_room && out.chat.thinking_budget >= out.chat.max_tokens)
        return bad("thinking.budget_tokens",
                   "'thinking.budget_tokens' must be less than 'max_tokens'");
      effort = budget_effort(out.chat.thinking_budget);
    } else if (type == "adaptive") {
      thinking = true;
    } else if (type != "disabled") {
      return bad("thinking.type", cat("'thinking.type' '", type,
                                      "' is not supported: enabled, adaptive or disabled"));
    }
  }
  if (const ordered_json* oc = f.get("output_config")) {
    if (!oc->is_object()) return bad("output_config", "'output_config' must be an object");
    K3_RETURN_IF_ERROR(
        unknown.check_read_only(*oc, kOutputConfigFields, "output_config", "output_config."));
    if (const ordered_json* e = member(*oc, "effort")) {
      if (!e->is_string())
        return bad("output_config.effort", "'output_config.effort' must be a string");
      K3_ASSIGN_OR_RETURN(std::optional<std::string> mapped,
                          messages_effort(e->get<std::string>(), "output_config.effort"));
      if (!mapped.has_value()) thinking = false;
      effort = std::move(mapped);
    }
    if (const ordered_json* fmt = member(*oc, "format")) {
      if (!fmt->is_object())
        return bad("output_config.format", "'output_config.format' must be an object");
      K3_RETURN_IF_ERROR(unknown.check_read_only(*fmt, kOutputFormatFields, "output_config.format",
                                                 "output_config.format."));
      K3_ASSIGN_OR_RETURN(std::string type, string_member(*fmt, "type", "output_config.format"));
      if (type != "json_schema")
        return bad("output_config.format.type",
                   cat("'output_config.format.type' '", type, "' is not json_schema"));
      const ordered_json* schema = member(*fmt, "schema");
      if (schema == nullptr || !schema->is_object())
        return bad("output_config.format.schema",
                   "'output_config.format.schema' must be an object");
      out.chat.render["response_format"] = {{"type", "json_schema"},
                                            {"json_schema", {{"schema", *schema}}}};
    }
  }
  out.chat.render["thinking"] = thinking;
  if (thinking && effort.has_value()) out.chat.render["thinking_effort"] = *effort;
  return absl::OkStatus();
}

// temperature (Anthropic's 0..1), top_p, top_k, and k3's seed and
// k3_expert_top_p extensions, checked as the chat route checks them.
Status parse_sampling(const FieldReader& f, SamplingOptions& s) {
  K3_ASSIGN_OR_RETURN(std::optional<double> t, f.number("temperature"));
  if (t.has_value()) {
    if (!(*t >= 0 && *t <= 1)) return bad("temperature", "'temperature' must be between 0 and 1");
    s.temperature = static_cast<float>(*t);
  }
  K3_ASSIGN_OR_RETURN(std::optional<double> p, f.number("top_p"));
  if (p.has_value()) {
    if (!(*p > 0 && *p <= 1)) return bad("top_p", "'top_p' must be greater than 0 and at most 1");
    s.top_p = static_cast<float>(*p);
  }
  K3_ASSIGN_OR_RETURN(s.top_k, f.integer("top_k"));
  if (s.top_k.has_value() && *s.top_k < 0) return bad("top_k", "'top_k' must be at least 0");
  if (const ordered_json* seed = f.get("seed")) {
    if (!seed->is_number_integer()) return bad("seed", "'seed' must be an integer");
    s.seed = seed->is_number_unsigned() ? seed->get<uint64_t>()
                                        : static_cast<uint64_t>(seed->get<int64_t>());
  }
  K3_ASSIGN_OR_RETURN(std::optional<double> etp, f.number("k3_expert_top_p"));
  if (etp.has_value()) {
    if (!(*etp > 0.0 && *etp <= 1.0))
      return bad("k3_expert_top_p", "'k3_expert_top_p' must be greater than 0 and at most 1");
    s.expert_top_p = static_cast<float>(*etp);
  }
  return check_client_sampling(s);
}

// The accepted fields with no effect, type-checked.
Status check_ignored(const FieldReader& f, UnknownFields& unknown) {
  K3_ASSIGN_OR_RETURN(std::optional<FieldReader> metadata, f.object("metadata"));
  if (metadata.has_value()) {
    if (const ordered_json* m = f.get("metadata"))
      K3_RETURN_IF_ERROR(unknown.check_read_only(*m, kMetadataFields, "metadata", "metadata."));
    K3_RETURN_IF_ERROR(metadata->string("user_id").status());
  }
  K3_ASSIGN_OR_RETURN(std::optional<std::string> tier, f.string("service_tier"));
  if (tier.has_value() && *tier != "auto" && *tier != "standard_only")
    return bad("service_tier", "'service_tier' must be \"auto\" or \"standard_only\"");
  K3_RETURN_IF_ERROR(f.object("cache_control").status());
  K3_RETURN_IF_ERROR(f.string("inference_geo").status());
  K3_RETURN_IF_ERROR(f.string("speed").status());
  K3_RETURN_IF_ERROR(f.string("user_profile_id").status());
  for (std::string_view key : kRefusedFields)
    if (f.get(key) != nullptr)
      return bad(std::string(key), cat("'", key, "' is not supported (docs/messages-api.md)"));
  return absl::OkStatus();
}

}  // namespace

const std::vector<std::string_view>& messages_request_fields(MessagesEndpoint endpoint) {
  return endpoint == MessagesEndpoint::kCreate ? kCreateFields : kCountFields;
}

StatusOr<std::optional<std::string>> messages_effort(std::string_view effort,
                                                     std::string_view field) {
  if (effort == "none") return std::optional<std::string>();
  if (effort == "minimal" || effort == "low") return std::optional<std::string>("low");
  if (effort == "medium" || effort == "high") return std::optional<std::string>("high");
  if (effort == "xhigh" || effort == "max") return std::optional<std::string>("max");
  return bad(std::string(field),
             cat("'", field, "' '", effort,
                 "' is not supported: none, minimal, low, medium, high, xhigh or max"));
}

std::string budget_effort(int64_t budget_tokens) {
  if (budget_tokens <= 2048) return "low";
  if (budget_tokens <= 16384) return "high";
  return "max";
}

StatusOr<MessagesCall> parse_messages_request(std::string_view body, MessagesEndpoint endpoint) {
  UnknownFields strict(UnknownFieldPolicy::kRefuse, "docs/messages-api.md");
  return parse_messages_request(body, endpoint, strict);
}

StatusOr<MessagesCall> parse_messages_request(std::string_view body, MessagesEndpoint endpoint,
                                              UnknownFields& unknown) {
  K3_ASSIGN_OR_RETURN(const ordered_json request, parse_body(body));
  const bool create = endpoint == MessagesEndpoint::kCreate;
  K3_RETURN_IF_ERROR(unknown.check_read_only(request, create ? kCreateFields : kCountFields,
                                             create ? "/v1/messages" : "/v1/messages/count_tokens",
                                             ""));
  const FieldReader f(request);
  MessagesCall out;
  ChatCall& call = out.chat;

  K3_ASSIGN_OR_RETURN(std::optional<std::string> model, f.string("model"));
  if (!model.has_value()) return bad("model", "'model' is required");
  call.model = std::move(*model);
  K3_RETURN_IF_ERROR(check_ignored(f, unknown));

  if (create) {
    K3_ASSIGN_OR_RETURN(std::optional<int64_t> max_tokens, f.count("max_tokens"));
    if (!max_tokens.has_value()) return bad("max_tokens", "'max_tokens' is required");
    call.max_tokens = *max_tokens;
    K3_RETURN_IF_ERROR(parse_sampling(f, call.sampling));
    K3_ASSIGN_OR_RETURN(std::optional<bool> stream, f.boolean("stream"));
    call.stream = stream.value_or(false);
    if (const ordered_json* stops = f.get("stop_sequences")) {
      if (!stops->is_array())
        return bad("stop_sequences", "'stop_sequences' must be an array of strings");
      for (const ordered_json& s : *stops) {
        if (!s.is_string())
          return bad("stop_sequences", "'stop_sequences' must be an array of strings");
        call.stop.push_back(s.get<std::string>());
      }
      Status s = validate_stop(call.stop);
      if (!s.ok()) return bad("stop_sequences", cat("'stop_sequences': ", msg(s)));
    }
  }

  ordered_json messages = ordered_json::array();
  if (const ordered_json* system = f.get("system")) {
    K3_ASSIGN_OR_RETURN(std::string text, text_or_blocks(*system, "system", unknown));
    messages.push_back({{"role", "system"}, {"content", std::move(text)}});
  }
  K3_RETURN_IF_ERROR(convert_messages(f.get("messages"), messages, unknown));
  call.render["messages"] = std::move(messages);
  if (const ordered_json* tools = f.get("tools")) {
    K3_ASSIGN_OR_RETURN(ordered_json converted, convert_tools(*tools, unknown));
    if (!converted.empty()) call.render["tools"] = std::move(converted);
  }
  if (const ordered_json* choice = f.get("tool_choice"))
    K3_RETURN_IF_ERROR(convert_tool_choice(*choice, call, unknown));
  K3_RETURN_IF_ERROR(convert_thinking(f, out, create, unknown));
  return out;
}

const char* messages_stop_reason(FinishReason reason, bool by_stop_sequence) {
  switch (reason) {
    case FinishReason::kLength:
      return "max_tokens";
    case FinishReason::kToolCalls:
      return "tool_use";
    case FinishReason::kStop:
      break;
  }
  return by_stop_sequence ? "stop_sequence" : "end_turn";
}

json messages_usage_json(const Usage& usage) {
  return {{"input_tokens", usage.prompt_tokens - usage.cached_tokens},
          {"output_tokens", usage.completion_tokens},
          {"cache_creation_input_tokens", 0},
          {"cache_read_input_tokens", usage.cached_tokens}};
}

json messages_response_json(std::string_view id, std::string_view model, const ChoiceResult& choice,
                            const std::optional<std::string>& stop_sequence, const Usage& usage) {
  const OutputMessage& m = choice.message;
  json content = json::array();
  if (!m.reasoning_content.empty())
    content.push_back({{"type", "thinking"}, {"thinking", m.reasoning_content}, {"signature", ""}});
  if (!m.content.empty()) content.push_back({{"type", "text"}, {"text", m.content}});
  for (const ToolCallFull& call : m.tool_calls) {
    json input = json::parse(call.arguments, nullptr, /*allow_exceptions=*/false);
    if (!input.is_object()) input = json::object();
    content.push_back(
        {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", std::move(input)}});
  }
  return {{"id", id},
          {"type", "message"},
          {"role", "assistant"},
          {"model", model},
          {"content", std::move(content)},
          {"stop_reason", messages_stop_reason(choice.reason, stop_sequence.has_value())},
          {"stop_sequence", stop_sequence ? json(*stop_sequence) : json(nullptr)},
          {"usage", messages_usage_json(usage)}};
}

const char* messages_error_type(int http_status) {
  switch (http_status) {
    case 401:
      return "authentication_error";
    case 403:
      return "permission_error";
    case 404:
      return "not_found_error";
    case 413:
      return "request_too_large";
    case 429:
      return "rate_limit_error";
    case 503:
      return "overloaded_error";
    default:
      return http_status < 500 ? "invalid_request_error" : "api_error";
  }
}

json messages_error_json(const Status& status) {
  return {
      {"type", "error"},
      {"error", {{"type", messages_error_type(http_status(status))}, {"message", msg(status)}}}};
}

HttpResponse messages_error_response(const Status& status) {
  HttpResponse r;
  r.status = http_status(status);
  r.error = msg(status);
  r.body = dump_body(messages_error_json(status));
  if (status.code() == absl::StatusCode::kResourceExhausted)
    r.headers.emplace_back("Retry-After", "1");
  return r;
}

}  // namespace k3::gateway
