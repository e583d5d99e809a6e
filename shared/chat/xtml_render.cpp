#include "shared/chat/xtml_render.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "shared/chat/chat_strings.h"
#include "shared/chat/python_compat.h"

namespace k3::chat {
namespace {

using nlohmann::ordered_json;

Status refuse(std::string_view where, std::string_view what) {
  return absl::InvalidArgumentError(where.empty() ? std::string(what) : cat(where, ": ", what));
}

// The field, or null when it is absent or JSON null.
const ordered_json* field(const ordered_json& object, std::string_view key) {
  if (!object.is_object()) return nullptr;
  auto it = object.find(std::string(key));
  if (it == object.end() || it->is_null()) return nullptr;
  return &*it;
}

// An optional string field; refused when present with another type.
StatusOr<std::optional<std::string>> string_field(const ordered_json& object, std::string_view key,
                                                  std::string_view where) {
  const ordered_json* v = field(object, key);
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return refuse(where, cat("'", key, "' must be a string"));
  return std::optional<std::string>(v->get<std::string>());
}

StatusOr<bool> bool_field(const ordered_json& object, std::string_view key, bool fallback) {
  const ordered_json* v = field(object, key);
  if (v == nullptr) return fallback;
  if (!v->is_boolean()) return refuse("", cat("'", key, "' must be true or false"));
  return v->get<bool>();
}

std::string type_name(const ordered_json& v) {
  switch (v.type()) {
    case ordered_json::value_t::string:
      return "string";
    case ordered_json::value_t::number_integer:
    case ordered_json::value_t::number_unsigned:
    case ordered_json::value_t::number_float:
      return "number";
    case ordered_json::value_t::boolean:
      return "boolean";
    case ordered_json::value_t::object:
      return "object";
    case ordered_json::value_t::array:
      return "array";
    default:
      return "null";
  }
}

class Renderer {
 public:
  Renderer(const ordered_json& request, const RenderOptions& options)
      : request_(request), options_(options) {}

  StatusOr<Segments> run();

 private:
  Status render_message(size_t i, const ordered_json& m, std::string_view role);
  Status render_assistant(size_t i, const ordered_json& m);
  Status render_tool_call(std::string_view where, const ordered_json& call, size_t index);
  Status render_tool_run(size_t begin, size_t end);
  Status render_content(std::string_view where, const ordered_json& m);
  void system_message(std::string_view type, std::string_view body);
  StatusOr<std::optional<std::string>> name_of(std::string_view where, const ordered_json& m);

  const ordered_json& request_;
  const RenderOptions& options_;
  SegmentWriter out_;
  bool thinking_ = true;
  const ordered_json* messages_ = nullptr;
  // The last assistant message rendered, and the tool messages since.
  const ordered_json* last_assistant_ = nullptr;
  size_t tools_since_assistant_ = 0;
};

// A synthesized system message: open message (role, type), the stripped
// body, close, end of message.
void Renderer::system_message(std::string_view type, std::string_view body) {
  out_.open("message", {{"role", "system"}, {"type", type}});
  out_.text(python_strip(body));
  out_.close("message");
  out_.end_of_msg();
}

StatusOr<std::optional<std::string>> Renderer::name_of(std::string_view where,
                                                       const ordered_json& m) {
  const ordered_json* v = field(m, "name");
  if (v == nullptr) return std::optional<std::string>();
  if (!v->is_string()) return refuse(where, "'name' must be a string");
  const std::string& name = v->get_ref<const std::string&>();
  if (name.empty()) return std::optional<std::string>();
  return std::optional<std::string>(name);
}

// A string, or the text parts of a list (each its own segment, untrimmed).
Status Renderer::render_content(std::string_view where, const ordered_json& m) {
  const ordered_json* content = field(m, "content");
  if (content == nullptr) return absl::OkStatus();
  if (content->is_string()) {
    out_.text(content->get_ref<const std::string&>());
    return absl::OkStatus();
  }
  if (!content->is_array()) {
    return refuse(where, "content must be a string or a list of content parts");
  }
  for (size_t p = 0; p < content->size(); ++p) {
    const ordered_json& part = (*content)[p];
    const std::string part_where = cat(where, ".content[", p, "]");
    if (!part.is_object()) return refuse(part_where, "a content part must be an object");
    const ordered_json* type = field(part, "type");
    if (type == nullptr || !type->is_string()) {
      return refuse(part_where, "a content part needs a 'type'");
    }
    if (*type != "text") {
      return refuse(part_where, cat("content parts of type '", type->get<std::string>(),
                                    "' are not supported (only text)"));
    }
    const ordered_json* text = field(part, "text");
    if (text == nullptr || !text->is_string()) {
      return refuse(part_where, "a text part needs a string 'text'");
    }
    out_.text(text->get_ref<const std::string&>());
  }
  return absl::OkStatus();
}

// user or system (a system message carrying tools declares them instead).
Status Renderer::render_message(size_t i, const ordered_json& m, std::string_view role) {
  const std::string where = cat("messages[", i, "]");
  if (role == "system") {
    if (const ordered_json* tools = field(m, "tools")) {
      if (!tools->is_array()) return refuse(where, "'tools' must be a list");
      if (!tools->empty()) {
        system_message(strings::kTypeToolDeclare,
                       cat(strings::kToolDeclareMidHead,
                           dump_json(*tools, JsonStyle::kCompactSorted), strings::kJsonTail));
        return absl::OkStatus();
      }
    }
  }
  K3_ASSIGN_OR_RETURN(std::optional<std::string> name, name_of(where, m));
  std::vector<std::pair<std::string_view, std::string>> attributes = {{"role", std::string(role)}};
  if (name.has_value()) attributes.emplace_back("name", *name);
  out_.open("message", attributes);
  K3_RETURN_IF_ERROR(render_content(where, m));
  out_.close("message");
  out_.end_of_msg();
  return absl::OkStatus();
}

Status Renderer::render_tool_call(std::string_view where, const ordered_json& call, size_t index) {
  if (!call.is_object()) return refuse(where, "a tool call must be an object");
  const ordered_json* function = field(call, "function");
  const ordered_json* name = function != nullptr ? field(*function, "name") : nullptr;
  if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty()) {
    return refuse(where, "a tool call needs a non-empty function name");
  }
  // The arguments: an object as is; a string parsed as JSON (not JSON: one
  // raw `json` element); null or a blank string: none.
  std::optional<ordered_json> arguments;
  std::optional<std::string> raw_arguments;
  if (const ordered_json* a = field(*function, "arguments")) {
    if (a->is_object()) {
      arguments = *a;
    } else if (a->is_string()) {
      const std::string& text = a->get_ref<const std::string&>();
      if (!is_blank(text)) {
        ordered_json parsed = ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
        if (parsed.is_discarded()) {
          raw_arguments = text;
        } else if (!parsed.is_object()) {
          return refuse(where, cat("the arguments must be a JSON object, not ", type_name(parsed)));
        } else {
          arguments = std::move(parsed);
        }
      }
    } else {
      return refuse(where, "the arguments must be a JSON object or a string holding one");
    }
  }
  out_.open("call",
            {{"tool", name->get_ref<const std::string&>()}, {"index", std::to_string(index)}});
  if (arguments.has_value()) {
    for (auto it = arguments->begin(); it != arguments->end(); ++it) {
      const ordered_json& value = it.value();
      out_.open("argument", {{"key", it.key()}, {"type", type_name(value)}});
      out_.text(value.is_string() ? value.get_ref<const std::string&>()
                                  : dump_json(value, JsonStyle::kSpacedOrdered));
      out_.close("argument");
    }
  } else if (raw_arguments.has_value()) {
    out_.open("json", {{"type", "object"}});
    out_.text(*raw_arguments);
    out_.close("json");
  }
  out_.close("call");
  return absl::OkStatus();
}

Status Renderer::render_assistant(size_t i, const ordered_json& m) {
  const std::string where = cat("messages[", i, "]");
  K3_ASSIGN_OR_RETURN(std::optional<std::string> name, name_of(where, m));
  std::vector<std::pair<std::string_view, std::string>> attributes = {{"role", "assistant"}};
  if (name.has_value()) attributes.emplace_back("name", *name);
  out_.open("message", attributes);
  if (thinking_) {
    out_.open("think");
    const ordered_json* reasoning = field(m, "reasoning_content");
    if (reasoning == nullptr) reasoning = field(m, "reasoning");
    if (reasoning != nullptr) {
      if (!reasoning->is_string()) return refuse(where, "the reasoning must be a string");
      const std::string& text = reasoning->get_ref<const std::string&>();
      if (!is_blank(text)) out_.text(text);
    }
    out_.close("think");
  }
  out_.open("response");
  K3_RETURN_IF_ERROR(render_content(where, m));
  out_.close("response");
  if (const ordered_json* calls = field(m, "tool_calls")) {
    if (!calls->is_array()) return refuse(where, "'tool_calls' must be a list");
    if (!calls->empty()) {
      out_.open("tools");
      for (size_t c = 0; c < calls->size(); ++c) {
        K3_RETURN_IF_ERROR(
            render_tool_call(cat(where, ".tool_calls[", c, "]"), (*calls)[c], c + 1));
      }
      out_.close("tools");
    }
  }
  out_.close("message");
  out_.end_of_msg();
  return absl::OkStatus();
}

// The call id a tool message answers (tool_call_id, else id), if a string.
std::optional<std::string> answered_call_id(const ordered_json& m) {
  const ordered_json* id = field(m, "tool_call_id");
  if (id == nullptr) id = field(m, "id");
  if (id == nullptr || !id->is_string()) return std::nullopt;
  return id->get<std::string>();
}

// The function name of a tool call (render_tool_call has checked it).
std::string call_name(const ordered_json& call) {
  const ordered_json* function = field(call, "function");
  const ordered_json* name = function != nullptr ? field(*function, "name") : nullptr;
  return name != nullptr && name->is_string() ? name->get<std::string>() : std::string();
}

// Tool messages [begin, end): re-sorted by the calls they answer when every
// one matches a call of the assistant message right before the run.
Status Renderer::render_tool_run(size_t begin, size_t end) {
  const ordered_json& messages = *messages_;
  std::vector<size_t> order(end - begin);
  std::iota(order.begin(), order.end(), begin);
  std::vector<std::optional<std::string>> matched_name(messages.size());
  const ordered_json* calls = nullptr;
  if (begin > 0) {
    const ordered_json& before = messages[begin - 1];
    const ordered_json* role = field(before, "role");
    if (role != nullptr && *role == "assistant") calls = field(before, "tool_calls");
  }
  if (calls != nullptr && calls->is_array() && !calls->empty()) {
    std::vector<size_t> position(messages.size());
    bool all_match = true;
    for (size_t t = begin; t < end && all_match; ++t) {
      const std::optional<std::string> id = answered_call_id(messages[t]);
      all_match = false;
      if (!id.has_value()) break;
      for (size_t c = 0; c < calls->size(); ++c) {
        const ordered_json* call_id = field((*calls)[c], "id");
        if (call_id != nullptr && call_id->is_string() && *call_id == *id) {
          position[t] = c;
          matched_name[t] = call_name((*calls)[c]);
          all_match = true;
          break;
        }
      }
    }
    if (all_match) {
      std::stable_sort(order.begin(), order.end(),
                       [&](size_t a, size_t b) { return position[a] < position[b]; });
    } else {
      std::fill(matched_name.begin(), matched_name.end(), std::nullopt);
    }
  }
  for (size_t t : order) {
    const ordered_json& m = messages[t];
    const std::string where = cat("messages[", t, "]");
    const size_t k = ++tools_since_assistant_;
    std::optional<std::string> name = matched_name[t];
    if (!name.has_value()) {
      for (std::string_view key : {"tool", "name"}) {
        K3_ASSIGN_OR_RETURN(std::optional<std::string> own, string_field(m, key, where));
        if (own.has_value() && !own->empty()) {
          name = own;
          break;
        }
      }
    }
    if (!name.has_value() && last_assistant_ != nullptr) {
      const ordered_json* last_calls = field(*last_assistant_, "tool_calls");
      if (last_calls != nullptr && last_calls->is_array() && k <= last_calls->size()) {
        std::string n = call_name((*last_calls)[k - 1]);
        if (!n.empty()) name = std::move(n);
      }
    }
    if (!name.has_value()) {
      return refuse(where,
                    "a tool message needs a tool name (its 'tool' or 'name', or a "
                    "tool_call_id matching a call of the assistant message before it)");
    }
    out_.open("message", {{"role", "tool"}, {"tool", *name}, {"index", std::to_string(k)}});
    K3_RETURN_IF_ERROR(render_content(where, m));
    out_.close("message");
    out_.end_of_msg();
  }
  return absl::OkStatus();
}

StatusOr<Segments> Renderer::run() {
  if (!request_.is_object()) return refuse("", "the request must be a JSON object");
  messages_ = field(request_, "messages");
  if (messages_ == nullptr) return refuse("", "'messages' is required");
  if (!messages_->is_array()) return refuse("", "'messages' must be a list");
  K3_ASSIGN_OR_RETURN(thinking_, bool_field(request_, "thinking", true));
  K3_ASSIGN_OR_RETURN(const bool generation_prompt,
                      bool_field(request_, "add_generation_prompt", true));

  // Everything checked before the first segment is written.
  const ordered_json* tools = field(request_, "tools");
  if (tools != nullptr && !tools->is_array()) return refuse("", "'tools' must be a list");
  std::optional<std::string> effort;
  if (thinking_) {
    K3_ASSIGN_OR_RETURN(effort, string_field(request_, "thinking_effort", ""));
    if (effort.has_value() && *effort != "low" && *effort != "high" && *effort != "max") {
      return refuse("", cat("thinking_effort '", *effort,
                            "' is not supported (low, high or max; case-sensitive)"));
    }
  }
  std::string_view tool_choice_note;
  if (const ordered_json* choice = field(request_, "tool_choice")) {
    if (choice->is_string()) {
      const std::string& c = choice->get_ref<const std::string&>();
      if (c == "required") {
        tool_choice_note = strings::kToolChoiceRequired;
      } else if (c == "none") {
        tool_choice_note = strings::kToolChoiceNone;
      } else if (c != "auto") {
        return refuse("", cat("tool_choice '", c,
                              "' is not supported (auto, required, none, or "
                              "an object naming a function)"));
      }
    } else if (!choice->is_object()) {
      return refuse("", "tool_choice must be a string or an object");
    }
  }
  std::string response_format_note;
  if (const ordered_json* format = field(request_, "response_format")) {
    if (!format->is_object()) return refuse("", "response_format must be an object");
    const ordered_json* type = field(*format, "type");
    if (type == nullptr || !type->is_string()) {
      return refuse("", "response_format needs a string 'type'");
    }
    if (*type == "json_object") {
      response_format_note = strings::kResponseFormatJsonObject;
    } else if (*type == "json_schema") {
      const ordered_json* js = field(*format, "json_schema");
      if (js == nullptr || !js->is_object()) {
        return refuse("", "response_format json_schema needs a 'json_schema' object");
      }
      const ordered_json* schema = field(*js, "schema");
      if (schema == nullptr) schema = field(*js, "json_schema");
      if (schema == nullptr) schema = js;
      response_format_note = cat(strings::kResponseFormatJsonSchemaHead,
                                 dump_json(*schema, JsonStyle::kCompactSorted), strings::kJsonTail);
    } else if (*type != "text") {
      return refuse("", cat("response_format type '", type->get<std::string>(),
                            "' is not supported (text, json_object, json_schema)"));
    }
  }

  if (tools != nullptr && !tools->empty()) {
    system_message(strings::kTypeToolDeclare,
                   cat(strings::kToolDeclareHead, dump_json(*tools, JsonStyle::kCompactSorted),
                       strings::kJsonTail));
  }
  if (effort.has_value()) {
    system_message(strings::kTypeThinkingEffort,
                   cat(strings::kThinkingEffortHead, *effort, strings::kThinkingEffortTail));
  }

  const ordered_json& messages = *messages_;
  size_t i = 0;
  while (i < messages.size()) {
    const ordered_json& m = messages[i];
    const std::string where = cat("messages[", i, "]");
    if (!m.is_object()) return refuse(where, "a message must be an object");
    K3_ASSIGN_OR_RETURN(std::optional<std::string> role, string_field(m, "role", where));
    if (!role.has_value()) return refuse(where, "a message needs a 'role'");
    if (*role == "developer" && options_.developer_as_system) role = "system";
    if (*role == "user" || *role == "system") {
      K3_RETURN_IF_ERROR(render_message(i, m, *role));
      ++i;
    } else if (*role == "assistant") {
      K3_RETURN_IF_ERROR(render_assistant(i, m));
      last_assistant_ = &m;
      tools_since_assistant_ = 0;
      ++i;
    } else if (*role == "tool") {
      size_t end = i + 1;
      while (end < messages.size()) {
        const ordered_json* r = field(messages[end], "role");
        if (r == nullptr || *r != "tool") break;
        ++end;
      }
      K3_RETURN_IF_ERROR(render_tool_run(i, end));
      i = end;
    } else {
      return refuse(where,
                    cat("role '", *role, "' is not supported (user, system, assistant or tool)"));
    }
  }

  if (!tool_choice_note.empty()) system_message(strings::kTypeToolChoice, tool_choice_note);
  if (!response_format_note.empty()) {
    system_message(strings::kTypeResponseFormat, response_format_note);
  }
  if (generation_prompt) {
    out_.open("message", {{"role", "assistant"}});
    out_.open(thinking_ ? "think" : "response");
  }
  return out_.take();
}

}  // namespace

StatusOr<Segments> render_chat(const nlohmann::ordered_json& request,
                               const RenderOptions& options) {
  Renderer renderer(request, options);
  return renderer.run();
}

StatusOr<bool> thinking_enabled(const nlohmann::ordered_json& request) {
  return bool_field(request, "thinking", true);
}

}  // namespace k3::chat
