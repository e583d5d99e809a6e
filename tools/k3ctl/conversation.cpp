#include "tools/k3ctl/conversation.h"

#include <optional>
#include <utility>

#include <nlohmann/json.hpp>

#include "shared/base/file.h"

namespace k3::tools {
namespace {

namespace v1 = k3serve::v1;
using nlohmann::json;

constexpr std::string_view kFormat = "k3serve-chat-1";
constexpr size_t kMaxFileBytes = 256u << 20;

absl::Status bad(std::string_view what) {
  return absl::InvalidArgumentError(cat("not a k3ctl chat conversation: ", what));
}

// The string at obj[key]: `fallback` when absent, an error when not a string
// or not UTF-8 (protobuf strings must be).
StatusOr<std::string> string_field(const json& obj, const std::string& key, std::string_view where,
                                   std::optional<std::string> fallback) {
  auto it = obj.find(key);
  if (it == obj.end() || it->is_null()) {
    if (fallback) return *fallback;
    return bad(cat(where, "'", key, "' is missing"));
  }
  if (!it->is_string()) return bad(cat(where, "'", key, "' must be a string"));
  std::string s = it->get<std::string>();
  if (std::string problem = check_utf8(s); !problem.empty())
    return bad(cat(where, "'", key, "': ", problem));
  return s;
}

StatusOr<v1::ChatMessage> message_from_json(const json& m, size_t index) {
  const std::string where = cat("messages[", index, "]: ");
  if (!m.is_object()) return bad(cat(where, "must be an object"));
  K3_ASSIGN_OR_RETURN(std::string role, string_field(m, "role", where, std::nullopt));
  if (role != "user" && role != "assistant")
    return bad(cat(where, "role must be user or assistant, not '", role, "'"));
  K3_ASSIGN_OR_RETURN(std::string content, string_field(m, "content", where, ""));
  v1::ChatMessage out = make_message(role, std::move(content));
  K3_ASSIGN_OR_RETURN(std::string reasoning, string_field(m, "reasoning_content", where, ""));
  if (!reasoning.empty()) {
    if (role != "assistant") return bad(cat(where, "only assistant messages carry reasoning"));
    out.set_reasoning_content(std::move(reasoning));
  }
  if (auto calls = m.find("tool_calls"); calls != m.end() && !calls->is_null()) {
    if (role != "assistant") return bad(cat(where, "only assistant messages carry tool_calls"));
    if (!calls->is_array()) return bad(cat(where, "'tool_calls' must be a list"));
    for (size_t i = 0; i < calls->size(); ++i) {
      const json& c = (*calls)[i];
      const std::string cw = cat(where, "tool_calls[", i, "]: ");
      if (!c.is_object()) return bad(cat(cw, "must be an object"));
      v1::ToolCall* call = out.add_tool_calls();
      K3_ASSIGN_OR_RETURN(*call->mutable_id(), string_field(c, "id", cw, ""));
      K3_ASSIGN_OR_RETURN(*call->mutable_name(), string_field(c, "name", cw, std::nullopt));
      K3_ASSIGN_OR_RETURN(*call->mutable_arguments(), string_field(c, "arguments", cw, "{}"));
    }
  }
  return out;
}

}  // namespace

Conversation::Conversation(const ChatOptions& options)
    : system_(options.system), thinking_(options.thinking), effort_(options.effort) {}

Status Conversation::set_think(std::string_view mode) {
  if (mode == "off") {
    thinking_ = false;
    effort_.clear();
  } else if (mode == "on") {
    // No effort sent: the model's default, max.
    thinking_ = true;
    effort_.clear();
  } else if (mode == "low" || mode == "high" || mode == "max") {
    thinking_ = true;
    effort_ = std::string(mode);
  } else {
    return absl::InvalidArgumentError(
        cat("thinking takes off, on, low, high or max, not '", mode, "'"));
  }
  return absl::OkStatus();
}

std::string Conversation::think_mode() const {
  if (!thinking_) return "off";
  return effort_.empty() ? "max" : effort_;  // none sent: the default
}

v1::ChatRequest Conversation::request(const ChatOptions& options) const {
  ChatOptions turn = options;
  turn.system = system_;
  turn.thinking = thinking_;
  turn.effort = effort_;
  return make_chat_request(turn, messages_);
}

std::string Conversation::to_json() const {
  json messages = json::array();
  for (const v1::ChatMessage& m : messages_) {
    json j = {{"role", m.role()}, {"content", m.content()}};
    if (!m.reasoning_content().empty()) j["reasoning_content"] = m.reasoning_content();
    if (m.tool_calls_size() > 0) {
      json calls = json::array();
      for (const v1::ToolCall& c : m.tool_calls())
        calls.push_back({{"id", c.id()}, {"name", c.name()}, {"arguments", c.arguments()}});
      j["tool_calls"] = std::move(calls);
    }
    messages.push_back(std::move(j));
  }
  const json doc = {{"format", kFormat},
                    {"system", system_},
                    {"thinking", thinking_},
                    {"thinking_effort", effort_},
                    {"messages", std::move(messages)}};
  return doc.dump(2) + "\n";
}

Status Conversation::load_json(std::string_view text) {
  const json doc = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return bad("the file is not valid JSON");
  if (!doc.is_object()) return bad("the top level must be a JSON object");
  K3_ASSIGN_OR_RETURN(std::string format, string_field(doc, "format", "", std::nullopt));
  if (format != kFormat) return bad(cat("'format' is '", format, "', expected '", kFormat, "'"));
  K3_ASSIGN_OR_RETURN(std::string system, string_field(doc, "system", "", ""));
  bool thinking = true;
  if (auto t = doc.find("thinking"); t != doc.end() && !t->is_null()) {
    if (!t->is_boolean()) return bad("'thinking' must be true or false");
    thinking = t->get<bool>();
  }
  K3_ASSIGN_OR_RETURN(std::string effort, string_field(doc, "thinking_effort", "", ""));
  if (!effort.empty() && effort != "low" && effort != "high" && effort != "max")
    return bad(cat("'thinking_effort' must be low, high, max or empty, not '", effort, "'"));
  auto list = doc.find("messages");
  if (list == doc.end() || !list->is_array()) return bad("'messages' must be a list");
  std::vector<v1::ChatMessage> messages;
  for (size_t i = 0; i < list->size(); ++i) {
    K3_ASSIGN_OR_RETURN(v1::ChatMessage m, message_from_json((*list)[i], i));
    messages.push_back(std::move(m));
  }
  system_ = std::move(system);
  thinking_ = thinking;
  effort_ = thinking ? std::move(effort) : std::string();
  messages_ = std::move(messages);
  return absl::OkStatus();
}

Status Conversation::save(const std::string& path) const {
  // A conversation is the user's own: other users may not read it.
  return base::write_file_atomic(path, to_json(), 0600);
}

Status Conversation::load(const std::string& path) {
  K3_ASSIGN_OR_RETURN(std::string text, base::read_small_file(path, kMaxFileBytes));
  Status s = load_json(text);
  if (!s.ok()) return absl::InvalidArgumentError(cat(path, ": ", msg(s)));
  return absl::OkStatus();
}

}  // namespace k3::tools
