#include "shared/chat/xtml_render.h"

#include <algorithm>
#include <optional>
#include <unordered_map>

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

StatusOr<std::optional<bool>> bool_field(const ordered_json& object, std::string_view key) {
  const ordered_json* v = field(object, key);
  if (v == nullptr) return std::optional<bool>();
  if (!v->is_boolean()) return refuse("", cat("'", key, "' must be true or false"));
  return std::optional<bool>(v->get<bool>());
}

// Python's truth value of a JSON value (`if value:`).
bool truthy(const ordered_json* v) {
  if (v == nullptr) return false;
  switch (v->type()) {
    case ordered_json::value_t::boolean:
      return v->get<bool>();
    case ordered_json::value_t::number_integer:
    case ordered_json::value_t::number_unsigned:
    case ordered_json::value_t::number_float:
      return v->get<double>() != 0;
    case ordered_json::value_t::string:
      return !v->get_ref<const std::string&>().empty();  // json::empty() is false for strings
    case ordered_json::value_t::array:
    case ordered_json::value_t::object:
      return !v->empty();
    default:
      return false;
  }
}

// str(value) of a tool call id, the key both sides are matched by.
std::string id_key(const ordered_json& v) {
  switch (v.type()) {
    case ordered_json::value_t::string:
      return v.get<std::string>();
    case ordered_json::value_t::boolean:
      return v.get<bool>() ? "True" : "False";
    case ordered_json::value_t::number_float:
      return python_float_repr(v.get<double>());
    default:
      return v.dump();
  }
}

// The reference's _xtml_type.
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
    case ordered_json::value_t::null:
      return "null";
    default:
      return "array";
  }
}

// A tool call's function object: `function`, else the call itself.
const ordered_json& call_function(const ordered_json& call) {
  const ordered_json* function = field(call, "function");
  return function != nullptr ? *function : call;
}

// One message in rendering order, with the tool name the tool-result
// re-sort resolved for it (normalize_xtml_tool_result_messages).
struct Placed {
  size_t index = 0;  // in the request's messages
  std::optional<std::string> tool;
};

// Each run of consecutive tool messages is matched by tool_call_id (else id)
// against the tool_calls of the most recent assistant message before it, even
// with other messages in between: when every message of the run matches, the
// run is sorted by the matched call's 1-based position (stable), and each
// message takes the call's function name. A run that does not fully match is
// left as it is.
std::vector<Placed> place_tool_results(const ordered_json& messages) {
  struct Match {
    size_t position;
    std::optional<std::string> name;
  };
  std::vector<Placed> out;
  out.reserve(messages.size());
  std::unordered_map<std::string, Match> calls;  // id -> first call with it
  size_t i = 0;
  const auto role_is = [&](size_t k, std::string_view role) {
    const ordered_json* r = field(messages[k], "role");
    return r != nullptr && r->is_string() && r->get_ref<const std::string&>() == role;
  };
  while (i < messages.size()) {
    if (role_is(i, "assistant")) {
      calls.clear();
      const ordered_json* tool_calls = field(messages[i], "tool_calls");
      if (truthy(tool_calls) && tool_calls->is_array()) {
        for (size_t c = 0; c < tool_calls->size(); ++c) {
          const ordered_json& call = (*tool_calls)[c];
          const ordered_json* id = call.is_object() ? field(call, "id") : nullptr;
          if (id == nullptr) continue;
          const ordered_json* name =
              call_function(call).is_object() ? field(call_function(call), "name") : nullptr;
          Match m{c + 1, std::nullopt};
          if (name != nullptr && name->is_string()) m.name = name->get<std::string>();
          calls.emplace(id_key(*id), std::move(m));
        }
      }
      out.push_back({i++, std::nullopt});
      continue;
    }
    if (!role_is(i, "tool")) {
      out.push_back({i++, std::nullopt});
      continue;
    }
    struct Entry {
      size_t position;
      size_t index;
      std::optional<std::string> name;
    };
    std::vector<Entry> run;
    bool resolved = true;
    for (; i < messages.size() && role_is(i, "tool"); ++i) {
      const ordered_json* id = field(messages[i], "tool_call_id");
      if (id == nullptr) id = field(messages[i], "id");
      auto match = id != nullptr ? calls.find(id_key(*id)) : calls.end();
      if (match == calls.end()) {
        resolved = false;
        run.push_back({0, i, std::nullopt});
      } else {
        run.push_back({match->second.position, i, match->second.name});
      }
    }
    if (resolved) {
      std::stable_sort(run.begin(), run.end(),
                       [](const Entry& a, const Entry& b) { return a.position < b.position; });
    }
    for (Entry& e : run) out.push_back({e.index, resolved ? std::move(e.name) : std::nullopt});
  }
  return out;
}

class Renderer {
 public:
  Renderer(const ordered_json& request, const RenderOptions& options)
      : request_(request), options_(options) {}

  StatusOr<Segments> run();

 private:
  Status render_plain(const std::string& where, const ordered_json& m, std::string_view role);
  Status render_assistant(const std::string& where, const ordered_json& m);
  Status render_tool_call(const std::string& where, const ordered_json& call, size_t index);
  Status render_tool(const std::string& where, const ordered_json& m,
                     const std::optional<std::string>& resolved);
  Status render_content(const std::string& where, const ordered_json& m);
  void tool_declare(std::string_view head, const ordered_json& tools);
  void system_message(std::string_view type, std::string_view body);
  Status open_message(const std::string& where, const ordered_json& m, std::string_view role);

  const ordered_json& request_;
  const RenderOptions& options_;
  SegmentWriter out_;
  bool thinking_ = true;
  // The tool_calls of the last assistant message (null before one, or when
  // it has none), and the tool messages rendered since it.
  const ordered_json* last_calls_ = nullptr;
  size_t tool_index_ = 0;
};

// A synthesized system message: open message (role, type), the stripped
// body, close, end of message.
void Renderer::system_message(std::string_view type, std::string_view body) {
  out_.open("message", {{"role", "system"}, {"type", type}});
  out_.text(python_strip(body));
  out_.close("message");
  out_.end_of_msg();
}

// The tools, deep-sorted, in a tool-declare message (its body unstripped).
void Renderer::tool_declare(std::string_view head, const ordered_json& tools) {
  out_.open("message", {{"role", "system"}, {"type", strings::kTypeToolDeclare}});
  out_.text(cat(head, dump_json(tools, JsonStyle::kCompactSorted), strings::kJsonTail));
  out_.close("message");
  out_.end_of_msg();
}

// <|open|>message role="..." [name="..."] when the name is non-empty.
Status Renderer::open_message(const std::string& where, const ordered_json& m,
                              std::string_view role) {
  K3_ASSIGN_OR_RETURN(std::optional<std::string> name, string_field(m, "name", where));
  std::vector<std::pair<std::string_view, std::string>> attributes = {{"role", std::string(role)}};
  if (name.has_value() && !name->empty()) attributes.emplace_back("name", *name);
  out_.open("message", attributes);
  return absl::OkStatus();
}

// A string; or a list of parts, each a text (its own segment, untrimmed) or
// an image (the placeholder, markup).
Status Renderer::render_content(const std::string& where, const ordered_json& m) {
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
    if (type == nullptr) return refuse(part_where, "a content part needs a 'type'");
    if (*type == "image" || *type == "image_url") {
      out_.markup(kImagePlaceholder);
      continue;
    }
    const ordered_json* text = field(part, "text");
    if (text == nullptr) return refuse(part_where, "the part needs a 'text'");
    if (!text->is_string()) return refuse(part_where, "'text' must be a string");
    out_.text(text->get_ref<const std::string&>());
  }
  return absl::OkStatus();
}

// user or system (a system message with tools declares them instead).
Status Renderer::render_plain(const std::string& where, const ordered_json& m,
                              std::string_view role) {
  if (role == "system") {
    if (const ordered_json* tools = field(m, "tools"); truthy(tools)) {
      tool_declare(strings::kToolDeclareMidHead, *tools);
      return absl::OkStatus();
    }
  }
  K3_RETURN_IF_ERROR(open_message(where, m, role));
  K3_RETURN_IF_ERROR(render_content(where, m));
  out_.close("message");
  out_.end_of_msg();
  return absl::OkStatus();
}

Status Renderer::render_tool_call(const std::string& where, const ordered_json& call,
                                  size_t index) {
  if (!call.is_object()) return refuse(where, "a tool call must be an object");
  const ordered_json& function = call_function(call);
  if (!function.is_object()) return refuse(where, "'function' must be an object");
  const ordered_json* name = field(function, "name");
  if (name == nullptr) return refuse(where, "a tool call needs a function 'name'");
  if (!name->is_string()) return refuse(where, "the function 'name' must be a string");
  // The arguments: an object as is; a string parsed as JSON (not JSON: one
  // raw `json` element); absent or a blank string: none.
  std::optional<ordered_json> arguments;
  std::optional<std::string> raw_arguments;
  if (const ordered_json* a = field(function, "arguments")) {
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
  if (raw_arguments.has_value()) {
    out_.open("json", {{"type", "object"}});
    out_.text(*raw_arguments);
    out_.close("json");
  } else if (arguments.has_value()) {
    for (auto it = arguments->begin(); it != arguments->end(); ++it) {
      const ordered_json& value = it.value();
      out_.open("argument", {{"key", it.key()}, {"type", type_name(value)}});
      out_.text(value.is_string() ? value.get_ref<const std::string&>()
                                  : dump_json(value, JsonStyle::kSpacedOrdered));
      out_.close("argument");
    }
  }
  out_.close("call");
  return absl::OkStatus();
}

Status Renderer::render_assistant(const std::string& where, const ordered_json& m) {
  const ordered_json* calls = field(m, "tool_calls");
  if (calls != nullptr && !calls->is_array() && truthy(calls)) {
    return refuse(where, "'tool_calls' must be a list");
  }
  last_calls_ = calls != nullptr && calls->is_array() ? calls : nullptr;
  tool_index_ = 0;
  K3_RETURN_IF_ERROR(open_message(where, m, "assistant"));
  if (thinking_) {
    // reasoning_content, or reasoning when that is empty or absent.
    const ordered_json* reasoning = field(m, "reasoning_content");
    if (!truthy(reasoning)) reasoning = field(m, "reasoning");
    out_.open("think");
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
  if (truthy(calls)) {
    out_.open("tools");
    for (size_t c = 0; c < calls->size(); ++c) {
      K3_RETURN_IF_ERROR(render_tool_call(cat(where, ".tool_calls[", c, "]"), (*calls)[c], c + 1));
    }
    out_.close("tools");
  }
  out_.close("message");
  out_.end_of_msg();
  return absl::OkStatus();
}

// The tool name: the re-sort's, else the message's `tool` (even empty), else
// its `name`, else the call at the same position among the last assistant
// message's tool_calls.
Status Renderer::render_tool(const std::string& where, const ordered_json& m,
                             const std::optional<std::string>& resolved) {
  const size_t k = ++tool_index_;
  std::optional<std::string> name = resolved;
  if (!name.has_value()) {
    const bool has_tool = field(m, "tool") != nullptr;
    K3_ASSIGN_OR_RETURN(name, string_field(m, has_tool ? "tool" : "name", where));
  }
  if (!name.has_value() && last_calls_ != nullptr && k <= last_calls_->size()) {
    const ordered_json& call = (*last_calls_)[k - 1];
    const std::string call_where = cat(where, ": its call (tool_calls[", k - 1, "])");
    if (!call.is_object()) return refuse(call_where, "a tool call must be an object");
    K3_ASSIGN_OR_RETURN(name, string_field(call_function(call), "name", call_where));
    if (!name.has_value()) return refuse(call_where, "a tool call needs a function 'name'");
  }
  if (!name.has_value()) {
    return refuse(where,
                  "a tool message needs a tool name: its 'tool' or 'name', or a call of the "
                  "last assistant message (by tool_call_id, or at the same position)");
  }
  out_.open("message", {{"role", "tool"}, {"tool", *name}, {"index", std::to_string(k)}});
  K3_RETURN_IF_ERROR(render_content(where, m));
  out_.close("message");
  out_.end_of_msg();
  return absl::OkStatus();
}

StatusOr<Segments> Renderer::run() {
  if (!request_.is_object()) return refuse("", "the request must be a JSON object");
  const ordered_json* messages = field(request_, "messages");
  if (messages == nullptr) return refuse("", "'messages' is required");
  if (!messages->is_array()) return refuse("", "'messages' must be a list");
  K3_ASSIGN_OR_RETURN(const ChatOptions chat, chat_options(request_));
  thinking_ = chat.thinking;
  K3_ASSIGN_OR_RETURN(const std::optional<bool> generation_prompt,
                      bool_field(request_, "add_generation_prompt"));

  if (const ordered_json* tools = field(request_, "tools"); truthy(tools)) {
    tool_declare(strings::kToolDeclareHead, *tools);
  }
  if (thinking_) {
    system_message(strings::kTypeThinkingEffort,
                   cat(strings::kThinkingEffortHead, chat.effort, strings::kThinkingEffortTail));
  }

  for (const Placed& placed : place_tool_results(*messages)) {
    const ordered_json& m = (*messages)[placed.index];
    const std::string where = cat("messages[", placed.index, "]");
    if (!m.is_object()) continue;  // skipped, as the reference skips it
    const ordered_json* role = field(m, "role");
    if (role == nullptr) return refuse(where, "a message needs a 'role'");
    if (!role->is_string()) continue;
    std::string_view r = role->get_ref<const std::string&>();
    if (r == "developer" && options_.developer_as_system) r = "system";
    if (r == "user" || r == "system") {
      K3_RETURN_IF_ERROR(render_plain(where, m, r));
    } else if (r == "assistant") {
      K3_RETURN_IF_ERROR(render_assistant(where, m));
    } else if (r == "tool") {
      K3_RETURN_IF_ERROR(render_tool(where, m, placed.tool));
    }
    // Any other role is skipped, as the reference skips it.
  }

  if (const ordered_json* choice = field(request_, "tool_choice"); choice != nullptr) {
    if (*choice == "required")
      system_message(strings::kTypeToolChoice, strings::kToolChoiceRequired);
    if (*choice == "none") system_message(strings::kTypeToolChoice, strings::kToolChoiceNone);
  }
  if (const ordered_json* format = field(request_, "response_format"); format != nullptr) {
    // The type: response_format.type (the object itself when it has none),
    // or response_format when it is not an object.
    const ordered_json* type = format;
    if (format->is_object()) type = field(*format, "type");
    if (type != nullptr && *type == "json_object") {
      system_message(strings::kTypeResponseFormat, strings::kResponseFormatJsonObject);
    } else if (type != nullptr && *type == "json_schema") {
      // The schema: json_schema.schema, else json_schema.json_schema, else
      // json_schema itself (null without one).
      const ordered_json* schema = format->is_object() ? field(*format, "json_schema") : nullptr;
      if (schema != nullptr && schema->is_object()) {
        if (const ordered_json* s = field(*schema, "schema")) {
          schema = s;
        } else if (const ordered_json* j = field(*schema, "json_schema")) {
          schema = j;
        }
      }
      const ordered_json none;
      system_message(strings::kTypeResponseFormat,
                     cat(strings::kResponseFormatJsonSchemaHead,
                         dump_json(schema != nullptr ? *schema : none, JsonStyle::kCompactSorted),
                         strings::kJsonTail));
    }
  }
  if (generation_prompt.value_or(true)) {
    out_.open("message", {{"role", "assistant"}});
    out_.open(thinking_ ? "think" : "response");
  }
  return out_.take();
}

}  // namespace

StatusOr<ChatOptions> chat_options(const nlohmann::ordered_json& request) {
  K3_ASSIGN_OR_RETURN(const std::optional<bool> thinking, bool_field(request, "thinking"));
  K3_ASSIGN_OR_RETURN(const std::optional<bool> enable, bool_field(request, "enable_thinking"));
  K3_ASSIGN_OR_RETURN(const std::optional<std::string> reasoning_effort,
                      string_field(request, "reasoning_effort", ""));
  K3_ASSIGN_OR_RETURN(std::optional<std::string> effort,
                      string_field(request, "thinking_effort", ""));
  ChatOptions out;
  out.thinking = thinking.value_or(enable.value_or(true));
  bool from_reasoning_effort = false;
  if (reasoning_effort == "none") {
    out.thinking = false;
  } else if (!effort.has_value() && reasoning_effort.has_value()) {
    effort = reasoning_effort;
    from_reasoning_effort = true;
  }
  out.effort = effort.value_or("max");
  if (out.effort != "low" && out.effort != "high" && out.effort != "max") {
    if (from_reasoning_effort) {
      return refuse("", cat("'reasoning_effort' '", out.effort,
                            "' is not supported; supported values: ", kThinkingEfforts,
                            " (the model's thinking_effort), or none"));
    }
    return refuse("", cat("'thinking_effort' '", out.effort,
                          "' is not supported; supported values: ", kThinkingEfforts));
  }
  return out;
}

StatusOr<Segments> render_chat(const nlohmann::ordered_json& request,
                               const RenderOptions& options) {
  Renderer renderer(request, options);
  return renderer.run();
}

StatusOr<bool> thinking_enabled(const nlohmann::ordered_json& request) {
  K3_ASSIGN_OR_RETURN(const ChatOptions options, chat_options(request));
  return options.thinking;
}

}  // namespace k3::chat
