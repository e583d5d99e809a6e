#include "gateway/core/output_form_request.h"

#include <algorithm>
#include <cstdint>

#include "shared/grammar/output_forms.h"

namespace k3::gateway {

namespace v1 = k3serve::v1;
using nlohmann::ordered_json;

namespace {

Status bad(std::string what) {
  return absl::InvalidArgumentError(std::move(what));
}

const ordered_json* field(const ordered_json& o, const char* key) {
  if (!o.is_object()) return nullptr;
  auto it = o.find(key);
  return it == o.end() || it->is_null() ? nullptr : &*it;
}

// The schema of response_format json_schema: json_schema.schema (OpenAI),
// else json_schema.json_schema, else the json_schema object itself.
StatusOr<ordered_json> schema_of(const ordered_json& format) {
  const ordered_json* js = field(format, "json_schema");
  if (js == nullptr || !js->is_object())
    return bad("response_format json_schema needs a 'json_schema' object");
  const ordered_json* s = field(*js, "schema");
  if (s == nullptr) s = field(*js, "json_schema");
  if (s == nullptr) s = js;
  if (!s->is_object() && !s->is_boolean())
    return bad("response_format.json_schema.schema must be a JSON Schema object");
  if (const ordered_json* strict = field(*js, "strict"); strict != nullptr && !strict->is_boolean())
    return bad("response_format.json_schema.strict must be true or false");
  return *s;
}

}  // namespace

StatusOr<std::optional<v1::OutputConstraint>> output_constraint(const ordered_json& render,
                                                                bool thinking,
                                                                bool parallel_tool_calls,
                                                                int64_t think_budget) {
  grammar::OutputSpec spec;
  spec.thinking = thinking;
  spec.parallel_tool_calls = parallel_tool_calls;
  v1::OutputConstraint c;
  c.set_thinking(thinking);
  c.set_single_tool_call(!parallel_tool_calls);

  if (const ordered_json* tools = field(render, "tools")) {
    if (!tools->is_array()) return bad("'tools' must be an array");
    for (size_t i = 0; i < tools->size(); ++i) {
      const ordered_json& t = (*tools)[i];
      const std::string where = cat("tools[", i, "]");
      if (!t.is_object()) return bad(cat(where, " must be an object"));
      const ordered_json* type = field(t, "type");
      if (type != nullptr && *type != "function")
        return bad(cat(where, ".type must be \"function\""));
      const ordered_json* fn = field(t, "function");
      if (fn == nullptr || !fn->is_object()) return bad(cat(where, " needs a 'function' object"));
      const ordered_json* name = field(*fn, "name");
      if (name == nullptr || !name->is_string() || name->get_ref<const std::string&>().empty())
        return bad(cat(where, ".function.name must be a non-empty string"));
      grammar::ToolSpec tool;
      tool.name = name->get<std::string>();
      for (const grammar::ToolSpec& other : spec.tools)
        if (other.name == tool.name)
          return bad(cat(where, ": function '", tool.name, "' is defined twice"));
      if (const ordered_json* params = field(*fn, "parameters")) {
        if (!params->is_object()) return bad(cat(where, ".function.parameters must be an object"));
        tool.parameters = *params;
      }
      auto* pt = c.add_tools();
      pt->set_name(tool.name);
      pt->set_parameters_json(tool.parameters.dump());
      spec.tools.push_back(std::move(tool));
    }
  }

  spec.tool_choice = spec.tools.empty() ? grammar::OutputSpec::ToolChoice::kNone
                                        : grammar::OutputSpec::ToolChoice::kAuto;
  if (const ordered_json* choice = field(render, "tool_choice")) {
    if (choice->is_string()) {
      const std::string& s = choice->get_ref<const std::string&>();
      if (s == "none") {
        spec.tool_choice = grammar::OutputSpec::ToolChoice::kNone;
      } else if (s == "required") {
        if (spec.tools.empty()) return bad("tool_choice 'required' needs 'tools'");
        spec.tool_choice = grammar::OutputSpec::ToolChoice::kRequired;
      } else if (s != "auto") {
        return bad(cat("tool_choice '", s, "' is not auto, none or required"));
      }
    } else if (choice->is_object()) {
      const ordered_json* fn = field(*choice, "function");
      const ordered_json* name = fn != nullptr ? field(*fn, "name") : nullptr;
      if (name == nullptr || !name->is_string())
        return bad(
            "tool_choice must name a function: "
            "{\"type\":\"function\",\"function\":{\"name\":...}}");
      spec.named = name->get<std::string>();
      bool defined = false;
      for (const grammar::ToolSpec& t : spec.tools) defined = defined || t.name == spec.named;
      if (!defined)
        return bad(cat("tool_choice names function '", spec.named, "', which is not in 'tools'"));
      spec.tool_choice = grammar::OutputSpec::ToolChoice::kNamed;
    } else {
      return bad("'tool_choice' must be a string or an object");
    }
  }

  if (const ordered_json* format = field(render, "response_format")) {
    const ordered_json* type = field(*format, "type");
    if (type == nullptr || !type->is_string()) return bad("response_format needs a string 'type'");
    const std::string& t = type->get_ref<const std::string&>();
    if (t == "json_object") {
      spec.body = grammar::OutputSpec::Body::kJsonObject;
      c.set_body(v1::OutputConstraint::JSON_OBJECT);
    } else if (t == "json_schema") {
      K3_ASSIGN_OR_RETURN(spec.schema, schema_of(*format));
      spec.body = grammar::OutputSpec::Body::kJsonSchema;
      c.set_body(v1::OutputConstraint::JSON_SCHEMA);
      c.set_json_schema(spec.schema.dump());
    } else if (t != "text") {
      return bad(cat("response_format type '", t, "' is not text, json_object or json_schema"));
    }
  }

  const bool tools_limited =
      !spec.tools.empty() &&
      (spec.tool_choice != grammar::OutputSpec::ToolChoice::kAuto || !parallel_tool_calls);
  if (think_budget < 0) return bad("the thinking budget must be at least 0");
  const uint32_t budget =
      thinking ? static_cast<uint32_t>(std::min<int64_t>(think_budget, UINT32_MAX)) : 0;
  if (spec.body == grammar::OutputSpec::Body::kText && !tools_limited) {
    if (budget == 0) return std::nullopt;
    // Only the think channel (engined compiles no tool schema for it).
    v1::OutputConstraint think_only;
    think_only.set_thinking(true);
    think_only.set_tool_choice(v1::OutputConstraint::TOOL_CHOICE_AUTO);
    think_only.set_think_budget_tokens(budget);
    return think_only;
  }
  c.set_think_budget_tokens(budget);
  switch (spec.tool_choice) {
    case grammar::OutputSpec::ToolChoice::kNone:
      c.set_tool_choice(v1::OutputConstraint::TOOL_CHOICE_NONE);
      break;
    case grammar::OutputSpec::ToolChoice::kAuto:
      c.set_tool_choice(v1::OutputConstraint::TOOL_CHOICE_AUTO);
      break;
    case grammar::OutputSpec::ToolChoice::kRequired:
      c.set_tool_choice(v1::OutputConstraint::TOOL_CHOICE_REQUIRED);
      break;
    case grammar::OutputSpec::ToolChoice::kNamed:
      c.set_tool_choice(v1::OutputConstraint::TOOL_CHOICE_NAMED);
      c.set_named_tool(spec.named);
      break;
  }
  // Compiled here too: a schema engined would refuse is a 400 now.
  auto g = grammar::output_grammar(spec);
  if (!g.ok()) return bad(std::string(g.status().message()));
  return c;
}

}  // namespace k3::gateway
