#include "shared/grammar/output_forms.h"

#include "shared/chat/segment.h"
#include "shared/grammar/schema_compiler.h"

namespace k3::grammar {
namespace {

constexpr int64_t kMaxCalls = 16;
constexpr int kMaxTypedDepth = 16;

int32_t literal(Grammar* g, std::string_view markup) {
  Node n;
  n.kind = NodeKind::kLiteral;
  n.literal.add(markup_symbols(markup));
  return g->add(std::move(n));
}

int32_t seq(Grammar* g, std::vector<int32_t> children) {
  Node n;
  n.kind = NodeKind::kSeq;
  n.children = std::move(children);
  return g->add(std::move(n));
}

int32_t choice(Grammar* g, std::vector<int32_t> children, bool one_of = false) {
  Node n;
  n.kind = NodeKind::kChoice;
  n.children = std::move(children);
  n.one_of = one_of;
  return g->add(std::move(n));
}

int32_t free_text(Grammar* g) {
  Node n;
  n.kind = NodeKind::kFreeText;
  return g->add(std::move(n));
}

// A grammar that admits nothing is refused unless `may_be_empty` (a JSON
// document checked against a schema that says `false` somewhere).
StatusOr<std::shared_ptr<const Grammar>> finish(Grammar g, bool may_be_empty = false) {
  g.finish();
  if (!may_be_empty && g.nodes[static_cast<size_t>(g.root)].min_len >= kInfinite)
    return absl::InvalidArgumentError(
        "the schema admits no finite value (e.g. `false`, or a $ref cycle that never reaches a "
        "value)");
  return std::make_shared<const Grammar>(std::move(g));
}

// One argument element per type the value node can take.
StatusOr<int32_t> typed_argument(Grammar* g, const std::string& key, int32_t value, int depth) {
  if (depth > kMaxTypedDepth)
    return absl::InvalidArgumentError(cat("parameter '", key, "': alternatives nested too deep"));
  auto element = [&](std::string_view type, int32_t v) {
    const int32_t open =
        literal(g, cat(chat::kOpenToken, "argument key=\"", chat::escape_attribute(key),
                       "\" type=\"", type, "\"", chat::kSepToken));
    return seq(g, {open, v, literal(g, cat(chat::kCloseToken, "argument", chat::kSepToken))});
  };
  const Node n = g->nodes[static_cast<size_t>(value)];
  switch (n.kind) {
    case NodeKind::kString: {
      Node raw = n;
      raw.raw = true;
      return element("string", g->add(std::move(raw)));
    }
    case NodeKind::kNumber:
      return element("number", value);
    case NodeKind::kObject:
      return element("object", value);
    case NodeKind::kArray:
      return element("array", value);
    case NodeKind::kLiteral: {
      std::vector<int32_t> alts;
      for (const std::string& text : n.literal_texts) {
        const nlohmann::ordered_json v = nlohmann::ordered_json::parse(text);
        Node lit;
        lit.kind = NodeKind::kLiteral;
        std::string type = "number";
        if (v.is_string()) {
          lit.literal.add(symbols_of(v.get<std::string>()));
          type = "string";
        } else {
          lit.literal.add(symbols_of(text));
          type = v.is_boolean()  ? "boolean"
                 : v.is_null()   ? "null"
                 : v.is_object() ? "object"
                 : v.is_array()  ? "array"
                                 : "number";
        }
        alts.push_back(element(type, g->add(std::move(lit))));
      }
      return choice(g, std::move(alts));
    }
    case NodeKind::kChoice: {
      std::vector<int32_t> alts;
      for (int32_t c : n.children) {
        K3_ASSIGN_OR_RETURN(int32_t a, typed_argument(g, key, c, depth + 1));
        alts.push_back(a);
      }
      return choice(g, std::move(alts), n.one_of);
    }
    default:
      return absl::InternalError("typed_argument: an unexpected node");
  }
}

// The arguments of one call: typed elements, or one json element.
StatusOr<int32_t> call_arguments(Grammar* g, const ToolSpec& tool) {
  K3_ASSIGN_OR_RETURN(int32_t params, compile_schema(tool.parameters, g));
  // Through $ref aliases to the object.
  int32_t at = params;
  for (int k = 0; k < kMaxTypedDepth; ++k) {
    const Node& n = g->nodes[static_cast<size_t>(at)];
    if (n.kind != NodeKind::kChoice || n.children.size() != 1) break;
    at = n.children[0];
  }
  const Node object = g->nodes[static_cast<size_t>(at)];
  if (object.kind != NodeKind::kObject || object.properties.empty()) {
    const int32_t open = literal(g, cat(chat::kOpenToken, "json type=\"object\"", chat::kSepToken));
    const int32_t close = literal(g, cat(chat::kCloseToken, "json", chat::kSepToken));
    if (object.kind == NodeKind::kObject) return seq(g, {});  // no properties: no arguments
    return seq(g, {open, params, close});
  }
  std::vector<int32_t> parts;
  for (size_t p = 0; p < object.properties.size(); ++p) {
    K3_ASSIGN_OR_RETURN(int32_t arg,
                        typed_argument(g, object.properties[p].name, object.properties[p].node, 0));
    parts.push_back((object.required >> p & 1) ? arg : choice(g, {seq(g, {}), arg}));
  }
  return seq(g, std::move(parts));
}

StatusOr<int32_t> tools_element(Grammar* g, const OutputSpec& spec) {
  std::vector<int32_t> calls;
  for (const ToolSpec& tool : spec.tools) {
    if (spec.tool_choice == OutputSpec::ToolChoice::kNamed && tool.name != spec.named) continue;
    auto args = call_arguments(g, tool);
    if (!args.ok())
      return absl::InvalidArgumentError(
          cat("tool '", tool.name, "' parameters: ", args.status().message()));
    Node index;
    index.kind = NodeKind::kNumber;
    index.integer = true;
    index.has_min = index.has_max = true;
    index.min_value = 1;
    index.max_value = kMaxCalls;
    const int32_t head = literal(
        g, cat(chat::kOpenToken, "call tool=\"", chat::escape_attribute(tool.name), "\" index=\""));
    calls.push_back(seq(g, {head, g->add(std::move(index)), literal(g, cat("\"", chat::kSepToken)),
                            *args, literal(g, cat(chat::kCloseToken, "call", chat::kSepToken))}));
  }
  if (calls.empty())
    return absl::InvalidArgumentError(
        spec.tool_choice == OutputSpec::ToolChoice::kNamed
            ? cat("tool_choice names function '", spec.named, "', which is not among the tools")
            : std::string("tool_choice needs tools"));
  Node repeat;
  repeat.kind = NodeKind::kRepeat;
  repeat.item = choice(g, std::move(calls));
  repeat.min_count = 1;
  repeat.max_count = spec.parallel_tool_calls ? kMaxCalls : 1;
  const int32_t r = g->add(std::move(repeat));
  return seq(g, {literal(g, cat(chat::kOpenToken, "tools", chat::kSepToken)), r,
                 literal(g, cat(chat::kCloseToken, "tools", chat::kSepToken))});
}

}  // namespace

std::vector<int> markup_symbols(std::string_view text) {
  const std::string_view tokens[4] = {chat::kOpenToken, chat::kCloseToken, chat::kSepToken,
                                      chat::kEndOfMsgToken};
  std::vector<int> out;
  for (size_t i = 0; i < text.size();) {
    bool matched = false;
    for (int k = 0; k < 4 && !matched; ++k)
      if (text.substr(i).starts_with(tokens[k])) {
        out.push_back(256 + k);
        i += tokens[k].size();
        matched = true;
      }
    if (!matched) out.push_back(static_cast<unsigned char>(text[i++]));
  }
  return out;
}

StatusOr<std::shared_ptr<const Grammar>> json_document_grammar(
    const nlohmann::ordered_json* schema) {
  Grammar g;
  int32_t value = -1;
  bool has_false = false;
  if (schema == nullptr) {
    value = any_object_node(&g);
  } else {
    K3_ASSIGN_OR_RETURN(value, compile_schema(*schema, &g, &has_false));
  }
  g.root = seq(&g, {value, literal(&g, chat::kEndOfMsgToken)});
  return finish(std::move(g), /*may_be_empty=*/has_false);
}

std::string think_close_markup() {
  return cat(chat::kCloseToken, "think", chat::kSepToken, chat::kOpenToken, "response",
             chat::kSepToken);
}

std::shared_ptr<const Grammar> think_channel_grammar() {
  Grammar g;
  g.root = seq(&g, {free_text(&g), literal(&g, think_close_markup())});
  g.finish();
  return std::make_shared<const Grammar>(std::move(g));
}

StatusOr<std::shared_ptr<const Grammar>> output_grammar(const OutputSpec& spec) {
  Grammar g;
  std::vector<int32_t> parts;
  if (spec.thinking) {
    parts.push_back(free_text(&g));
    parts.push_back(literal(&g, think_close_markup()));
  }
  switch (spec.body) {
    case OutputSpec::Body::kText:
      parts.push_back(free_text(&g));
      break;
    case OutputSpec::Body::kJsonObject:
      parts.push_back(any_object_node(&g));
      break;
    case OutputSpec::Body::kJsonSchema: {
      K3_ASSIGN_OR_RETURN(int32_t v, compile_schema(spec.schema, &g));
      parts.push_back(v);
      break;
    }
  }
  parts.push_back(literal(&g, cat(chat::kCloseToken, "response", chat::kSepToken)));
  if (spec.tool_choice != OutputSpec::ToolChoice::kNone && !spec.tools.empty()) {
    K3_ASSIGN_OR_RETURN(int32_t tools, tools_element(&g, spec));
    parts.push_back(spec.tool_choice == OutputSpec::ToolChoice::kAuto
                        ? choice(&g, {seq(&g, {}), tools})
                        : tools);
  } else if (spec.tool_choice == OutputSpec::ToolChoice::kRequired ||
             spec.tool_choice == OutputSpec::ToolChoice::kNamed) {
    return absl::InvalidArgumentError("tool_choice requires a tool call but no tools are given");
  }
  parts.push_back(
      literal(&g, cat(chat::kCloseToken, "message", chat::kSepToken, chat::kEndOfMsgToken)));
  g.root = seq(&g, std::move(parts));
  return finish(std::move(g));
}

}  // namespace k3::grammar
