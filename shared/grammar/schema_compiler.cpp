#include "shared/grammar/schema_compiler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <set>

namespace k3::grammar {

using json = nlohmann::ordered_json;

namespace {

constexpr int kMaxNesting = 64;
constexpr size_t kMaxProperties = 64;

const std::set<std::string>& annotations() {
  static const std::set<std::string> k = {"title",      "description", "default",
                                          "examples",   "$comment",    "$schema",
                                          "deprecated", "readOnly",    "writeOnly"};
  return k;
}

const std::set<std::string>& supported() {
  static const std::set<std::string> k = {"type",
                                          "properties",
                                          "required",
                                          "additionalProperties",
                                          "enum",
                                          "const",
                                          "anyOf",
                                          "oneOf",
                                          "$ref",
                                          "$defs",
                                          "definitions",
                                          "items",
                                          "minItems",
                                          "maxItems",
                                          "minLength",
                                          "maxLength",
                                          "minimum",
                                          "maximum",
                                          "exclusiveMinimum",
                                          "exclusiveMaximum",
                                          "pattern"};
  return k;
}

bool known_type(const std::string& t) {
  return t == "object" || t == "array" || t == "string" || t == "number" || t == "integer" ||
         t == "boolean" || t == "null";
}

Node literal_node(const std::vector<std::string>& texts) {
  Node n;
  n.kind = NodeKind::kLiteral;
  for (const std::string& t : texts) n.literal.add(symbols_of(t));
  n.literal_texts = texts;
  return n;
}

// A JSON number's decimal text: integers exactly; a double as the shortest
// decimal that reads back as it (what the schema wrote, up to 17 digits).
std::string number_text(const json& v) {
  return v.dump();
}

std::string type_of(const json& v) {
  switch (v.type()) {
    case json::value_t::object:
      return "object";
    case json::value_t::array:
      return "array";
    case json::value_t::string:
      return "string";
    case json::value_t::boolean:
      return "boolean";
    case json::value_t::null:
      return "null";
    case json::value_t::number_float: {
      const double d = v.get<double>();
      return std::floor(d) == d && std::isfinite(d) ? "integer" : "number";
    }
    default:
      return "integer";
  }
}

class Compiler {
 public:
  Compiler(const json& root, Grammar* g) : root_(root), g_(g) {}

  StatusOr<int32_t> compile(const json& s, const std::string& path, int depth) {
    if (depth > kMaxNesting)
      return absl::InvalidArgumentError(cat(path, ": schemas nested over ", kMaxNesting, " deep"));
    if (s.is_boolean()) {
      if (s.get<bool>()) return any_value_node(g_);
      // `false`: no value. A property so named cannot appear, an array with
      // such items is empty, an alternative so spelled is never taken.
      has_false_ = true;
      Node never;
      never.kind = NodeKind::kChoice;
      return g_->add(std::move(never));
    }
    if (!s.is_object())
      return absl::InvalidArgumentError(cat(path, ": a schema must be an object or a boolean"));
    std::set<std::string> constraining;
    for (auto it = s.begin(); it != s.end(); ++it) {
      if (annotations().count(it.key())) continue;
      if (!supported().count(it.key()))
        return absl::InvalidArgumentError(
            cat("unsupported JSON Schema keyword '", it.key(), "' at ", path));
      if (it.key() != "$defs" && it.key() != "definitions") constraining.insert(it.key());
    }
    for (const char* defs : {"$defs", "definitions"})
      if (s.contains(defs) && !s[defs].is_object())
        return absl::InvalidArgumentError(cat(path, ": '", defs, "' must be an object"));
    // The keywords beside $ref, anyOf or oneOf apply too: they are merged
    // into the referenced schema, or into each alternative (both()).
    const auto beside = [&](const char* key) {
      json rest = json::object();
      for (auto it = s.begin(); it != s.end(); ++it)
        if (it.key() != key && it.key() != "$defs" && it.key() != "definitions")
          rest[it.key()] = it.value();
      return rest;
    };
    const auto constrains = [&](const json& rest) {
      for (auto it = rest.begin(); it != rest.end(); ++it)
        if (!annotations().count(it.key())) return true;
      return false;
    };
    if (s.contains("$ref")) {
      const json rest = beside("$ref");
      if (!constrains(rest)) return ref(s["$ref"], path, depth);
      K3_ASSIGN_OR_RETURN(const json* target, resolve(s["$ref"], path));
      K3_ASSIGN_OR_RETURN(json merged, both(rest, *target, path));
      return compile(merged, cat(path, " with $ref"), depth + 1);
    }
    for (const char* key : {"anyOf", "oneOf"}) {
      if (!s.contains(key)) continue;
      const json& alts = s[key];
      if (!alts.is_array() || alts.empty())
        return absl::InvalidArgumentError(cat(path, ": '", key, "' must be a non-empty list"));
      const json rest = beside(key);
      const bool merge = constrains(rest);
      Node n;
      n.kind = NodeKind::kChoice;
      n.one_of = std::string_view(key) == "oneOf";
      for (size_t i = 0; i < alts.size(); ++i) {
        const std::string at = cat(path, "/", key, "/", i);
        int32_t c = -1;
        if (merge) {
          K3_ASSIGN_OR_RETURN(json merged, both(rest, alts[i], at));
          K3_ASSIGN_OR_RETURN(c, compile(merged, at, depth + 1));
        } else {
          K3_ASSIGN_OR_RETURN(c, compile(alts[i], at, depth + 1));
        }
        n.children.push_back(c);
      }
      return g_->add(std::move(n));
    }
    std::vector<std::string> types;
    if (s.contains("type")) {
      const json& t = s["type"];
      if (t.is_string()) {
        types.push_back(t.get<std::string>());
      } else if (t.is_array() && !t.empty()) {
        for (const json& e : t) {
          if (!e.is_string())
            return absl::InvalidArgumentError(cat(path, ": 'type' lists a non-string"));
          types.push_back(e.get<std::string>());
        }
      } else {
        return absl::InvalidArgumentError(cat(path, ": 'type' must be a string or a list"));
      }
      for (const std::string& t2 : types)
        if (!known_type(t2))
          return absl::InvalidArgumentError(cat(path, ": unknown type '", t2, "'"));
    }
    if (s.contains("enum") || s.contains("const")) {
      for (const std::string& k : constraining)
        if (k != "enum" && k != "const" && k != "type")
          return absl::InvalidArgumentError(
              cat(path, ": enum/const together with '", k, "' is not supported"));
      // Values are written as declared (compact, object keys in the order
      // given); const beside enum is const's value, if the enum holds it.
      std::vector<json> values;
      if (s.contains("const")) values.push_back(s["const"]);
      if (s.contains("enum")) {
        if (!s["enum"].is_array() || s["enum"].empty())
          return absl::InvalidArgumentError(cat(path, ": 'enum' must be a non-empty list"));
        bool const_listed = false;
        for (const json& v : s["enum"]) {
          if (!s.contains("const"))
            values.push_back(v);
          else  // Equal as JSON values: objects whatever their key order.
            const_listed = const_listed || nlohmann::json(v) == nlohmann::json(s["const"]);
        }
        if (s.contains("const") && !const_listed)
          return absl::InvalidArgumentError(cat(path, ": 'const' is not one of the 'enum' values"));
      }
      std::vector<std::string> texts;
      for (const json& v : values) {
        const std::string t = type_of(v);
        bool typed = types.empty();
        for (const std::string& want : types)
          typed = typed || want == t || (want == "number" && t == "integer");
        if (typed) texts.push_back(v.dump());
      }
      if (texts.empty())
        return absl::InvalidArgumentError(cat(path, ": no enum/const value has the schema's type"));
      return g_->add(literal_node(texts));
    }
    const bool typed = !types.empty();
    if (!typed) types = {"object", "array", "string", "number", "boolean", "null"};
    Node choice;
    choice.kind = NodeKind::kChoice;
    for (const std::string& t : types) {
      int32_t id = -1;
      if (t == "object") {
        K3_ASSIGN_OR_RETURN(id, object(s, path, depth));
      } else if (t == "array") {
        K3_ASSIGN_OR_RETURN(id, array(s, path, depth));
      } else if (t == "string") {
        K3_ASSIGN_OR_RETURN(id, string(s, path));
      } else if (t == "number" || t == "integer") {
        K3_ASSIGN_OR_RETURN(id, number(s, path, t == "integer"));
      } else if (t == "boolean") {
        id = g_->add(literal_node({"true", "false"}));
      } else {
        id = g_->add(literal_node({"null"}));
      }
      choice.children.push_back(id);
    }
    if (choice.children.size() == 1) return choice.children[0];
    return g_->add(std::move(choice));
  }

 private:
  StatusOr<int64_t> count(const json& s, const char* key, const std::string& path) {
    const json& v = s[key];
    if (!v.is_number_integer() || v.get<int64_t>() < 0)
      return absl::InvalidArgumentError(cat(path, ": '", key, "' must be a non-negative integer"));
    return v.get<int64_t>();
  }

  // The schema a $ref names in this document.
  StatusOr<const json*> resolve(const json& r, const std::string& path) const {
    if (!r.is_string()) return absl::InvalidArgumentError(cat(path, ": '$ref' must be a string"));
    const std::string target = r.get<std::string>();
    if (target.empty() || target[0] != '#')
      return absl::InvalidArgumentError(
          cat(path, ": $ref '", target, "' is not a reference into this document (#...)"));
    if (target.size() == 1) return &root_;
    json::json_pointer ptr;
    try {
      ptr = json::json_pointer(target.substr(1));
    } catch (const json::exception&) {
      return absl::InvalidArgumentError(cat(path, ": $ref '", target, "' is not a JSON pointer"));
    }
    if (!root_.contains(ptr))
      return absl::InvalidArgumentError(cat(path, ": $ref '", target, "' names nothing"));
    return &root_.at(ptr);
  }

  StatusOr<int32_t> ref(const json& r, const std::string& path, int depth) {
    K3_ASSIGN_OR_RETURN(const json* at, resolve(r, path));
    const std::string target = r.get<std::string>();
    if (auto it = refs_.find(target); it != refs_.end()) return it->second;
    // A one-child choice first, so a recursive reference finds it.
    Node alias;
    alias.kind = NodeKind::kChoice;
    const int32_t id = g_->add(std::move(alias));
    refs_[target] = id;
    K3_ASSIGN_OR_RETURN(int32_t body, compile(*at, target, depth + 1));
    g_->nodes[static_cast<size_t>(id)].children = {body};
    return id;
  }

  // The schema of the values that match both a and b: their keywords side by
  // side. A keyword in both: `type` intersects (integer within number),
  // `required` unites, `properties` and `items` merge their schemas, bounds
  // keep the tighter, equal values stay; anything else (e.g. two patterns,
  // additionalProperties beside the other's properties, whose meaning
  // depends on the properties beside it) is refused, never guessed.
  StatusOr<json> both(const json& a, const json& b, const std::string& path) const {
    if (a.is_boolean()) return a.get<bool>() ? b : a;
    if (b.is_boolean()) return b.get<bool>() ? a : b;
    if (!a.is_object() || !b.is_object())
      return absl::InvalidArgumentError(cat(path, ": a schema must be an object or a boolean"));
    const auto refuse = [&](const std::string& k) {
      return absl::InvalidArgumentError(
          cat(path, ": '", k, "' both beside and inside $ref/anyOf/oneOf is not supported"));
    };
    for (const json* x : {&a, &b}) {
      const json* y = x == &a ? &b : &a;
      if (x->contains("additionalProperties") &&
          (y->contains("properties") || y->contains("additionalProperties")) &&
          nlohmann::json(*x) != nlohmann::json(*y))
        return refuse("additionalProperties");
    }
    json out = a;
    for (auto it = b.begin(); it != b.end(); ++it) {
      const std::string& k = it.key();
      const json& v = it.value();
      if (!out.contains(k)) {
        out[k] = v;
        continue;
      }
      json& mine = out[k];
      if (annotations().count(k) || k == "$defs" || k == "definitions" ||
          nlohmann::json(mine) == nlohmann::json(v))
        continue;
      if (k == "type") {
        const auto list = [&](const json& t) -> StatusOr<std::vector<std::string>> {
          std::vector<std::string> l;
          if (t.is_string()) l.push_back(t.get<std::string>());
          if (t.is_array())
            for (const json& e : t)
              if (e.is_string()) l.push_back(e.get<std::string>());
          if (l.empty() || l.size() != (t.is_array() ? t.size() : 1))
            return absl::InvalidArgumentError(cat(path, ": 'type' must be a string or a list"));
          for (const std::string& name : l)
            if (!known_type(name))
              return absl::InvalidArgumentError(cat(path, ": unknown type '", name, "'"));
          return l;
        };
        K3_ASSIGN_OR_RETURN(const std::vector<std::string> ta, list(mine));
        K3_ASSIGN_OR_RETURN(const std::vector<std::string> tb, list(v));
        json common = json::array();
        for (const std::string& t : ta) {
          const auto has = [&](const char* n) {
            return std::find(tb.begin(), tb.end(), n) != tb.end();
          };
          if (has(t.c_str()) || (t == "integer" && has("number")))
            common.push_back(t);
          else if (t == "number" && has("integer"))
            common.push_back("integer");
        }
        if (common.empty()) return json(false);  // no type in common: no value
        mine = common;
      } else if (k == "required") {
        if (!mine.is_array() || !v.is_array()) return refuse(k);
        for (const json& r : v)
          if (std::find(mine.begin(), mine.end(), r) == mine.end()) mine.push_back(r);
      } else if (k == "properties") {
        if (!mine.is_object() || !v.is_object()) return refuse(k);
        for (auto p = v.begin(); p != v.end(); ++p) {
          if (!mine.contains(p.key())) {
            mine[p.key()] = p.value();
          } else {
            K3_ASSIGN_OR_RETURN(mine[p.key()],
                                both(mine[p.key()], p.value(), cat(path, "/properties/", p.key())));
          }
        }
      } else if (k == "items") {
        if (mine.is_array() || v.is_array()) return refuse(k);
        K3_ASSIGN_OR_RETURN(mine, both(mine, v, cat(path, "/items")));
      } else if ((k == "minItems" || k == "minLength") && mine.is_number() && v.is_number()) {
        if (v > mine) mine = v;
      } else if ((k == "maxItems" || k == "maxLength") && mine.is_number() && v.is_number()) {
        if (v < mine) mine = v;
      } else if ((k == "minimum" || k == "exclusiveMinimum" || k == "maximum" ||
                  k == "exclusiveMaximum") &&
                 mine.is_number() && v.is_number()) {
        // Exact: the decimals the values are written as.
        const auto a = parse_decimal(number_text(mine)), b = parse_decimal(number_text(v));
        if (!a.ok() || !b.ok()) return refuse(k);
        const int c = compare_decimals(*b, *a);
        if (k == "minimum" || k == "exclusiveMinimum" ? c > 0 : c < 0) mine = v;
      } else {
        return refuse(k);
      }
    }
    return out;
  }

  StatusOr<int32_t> object(const json& s, const std::string& path, int depth) {
    Node n;
    n.kind = NodeKind::kObject;
    n.additional = any_value_node(g_);
    if (s.contains("properties")) {
      const json& props = s["properties"];
      if (!props.is_object())
        return absl::InvalidArgumentError(cat(path, ": 'properties' must be an object"));
      if (props.size() > kMaxProperties)
        return absl::InvalidArgumentError(
            cat(path, ": more than ", kMaxProperties, " properties are not supported"));
      for (auto it = props.begin(); it != props.end(); ++it) {
        K3_ASSIGN_OR_RETURN(int32_t c,
                            compile(it.value(), cat(path, "/properties/", it.key()), depth + 1));
        n.properties.push_back({it.key(), c});
      }
    }
    if (s.contains("additionalProperties")) {
      const json& a = s["additionalProperties"];
      if (a.is_boolean() && !a.get<bool>()) {
        n.additional = -1;
      } else {
        K3_ASSIGN_OR_RETURN(n.additional,
                            compile(a, cat(path, "/additionalProperties"), depth + 1));
      }
    }
    if (s.contains("required")) {
      const json& req = s["required"];
      if (!req.is_array())
        return absl::InvalidArgumentError(cat(path, ": 'required' must be a list"));
      for (const json& r : req) {
        if (!r.is_string())
          return absl::InvalidArgumentError(cat(path, ": 'required' lists a non-string"));
        const std::string name = r.get<std::string>();
        size_t p = 0;
        while (p < n.properties.size() && n.properties[p].name != name) ++p;
        if (p == n.properties.size()) {
          if (n.additional < 0)
            return absl::InvalidArgumentError(
                cat(path, ": required '", name,
                    "' is not in 'properties' and additionalProperties is false"));
          if (n.properties.size() >= kMaxProperties)
            return absl::InvalidArgumentError(
                cat(path, ": more than ", kMaxProperties, " properties are not supported"));
          n.properties.push_back({name, n.additional});
        }
        n.required |= uint64_t{1} << p;
      }
    }
    // The names' canonical spellings in a trie, each node knowing the
    // properties below it.
    for (size_t p = 0; p < n.properties.size(); ++p)
      n.keys.add(symbols_of(canonical_json_string_body(n.properties[p].name)));
    n.key_props.assign(n.keys.nodes.size(), 0);
    n.key_prop.assign(n.keys.nodes.size(), -1);
    n.key_depth.assign(n.keys.nodes.size(), 0);
    for (size_t p = 0; p < n.properties.size(); ++p) {
      int32_t at = 0, depth = 0;
      n.key_props[0] |= uint64_t{1} << p;
      for (int sym : symbols_of(canonical_json_string_body(n.properties[p].name))) {
        at = n.keys.child(at, sym);
        n.key_depth[static_cast<size_t>(at)] = ++depth;
        n.key_props[static_cast<size_t>(at)] |= uint64_t{1} << p;
      }
      n.key_prop[static_cast<size_t>(at)] = static_cast<int32_t>(p);
    }
    return g_->add(std::move(n));
  }

  StatusOr<int32_t> array(const json& s, const std::string& path, int depth) {
    Node n;
    n.kind = NodeKind::kArray;
    if (s.contains("items")) {
      if (s["items"].is_array())
        return absl::InvalidArgumentError(
            cat(path, ": 'items' as a list (tuples) is not supported"));
      K3_ASSIGN_OR_RETURN(n.item, compile(s["items"], cat(path, "/items"), depth + 1));
    } else {
      n.item = any_value_node(g_);
    }
    if (s.contains("minItems")) {
      K3_ASSIGN_OR_RETURN(n.min_count, count(s, "minItems", path));
    }
    if (s.contains("maxItems")) {
      K3_ASSIGN_OR_RETURN(n.max_count, count(s, "maxItems", path));
    }
    if (n.max_count < n.min_count)
      return absl::InvalidArgumentError(cat(path, ": maxItems is below minItems"));
    return g_->add(std::move(n));
  }

  StatusOr<int32_t> string(const json& s, const std::string& path) {
    Node n;
    n.kind = NodeKind::kString;
    if (s.contains("minLength")) {
      K3_ASSIGN_OR_RETURN(n.min_count, count(s, "minLength", path));
    }
    if (s.contains("maxLength")) {
      K3_ASSIGN_OR_RETURN(n.max_count, count(s, "maxLength", path));
    }
    if (n.max_count < n.min_count)
      return absl::InvalidArgumentError(cat(path, ": maxLength is below minLength"));
    if (s.contains("pattern")) {
      if (!s["pattern"].is_string())
        return absl::InvalidArgumentError(cat(path, ": 'pattern' must be a string"));
      auto re = Regex::compile(s["pattern"].get<std::string>());
      if (!re.ok()) return absl::InvalidArgumentError(cat(path, ": ", re.status().message()));
      n.regex = static_cast<int32_t>(g_->regexes.size());
      g_->regexes.push_back(std::move(*re));
    }
    return g_->add(std::move(n));
  }

  // The tighter of `key` and its exclusive form (exclusive on a tie); absent
  // when neither is given.
  StatusOr<NumberRange::Bound> bound(const json& s, const char* key, const char* exclusive,
                                     bool lower, const std::string& path) {
    NumberRange::Bound out;
    for (const char* k : {key, exclusive}) {
      if (!s.contains(k)) continue;
      const json& v = s[k];
      if (!v.is_number())
        return absl::InvalidArgumentError(
            cat(path, ": '", k, "' must be a number",
                v.is_boolean() ? " (the draft 4 boolean form is not supported)" : ""));
      auto d = parse_decimal(number_text(v));
      if (!d.ok())
        return absl::InvalidArgumentError(cat(path, ": '", k, "': ", d.status().message()));
      const bool open = k == exclusive;
      const int c = out.present ? compare_decimals(*d, out.value) : (lower ? 1 : -1);
      if ((lower ? c > 0 : c < 0) || (c == 0 && open)) {
        out.present = true;
        out.open = open;
        out.value = std::move(*d);
      }
    }
    return out;
  }

  StatusOr<int32_t> number(const json& s, const std::string& path, bool integer) {
    Node n;
    n.kind = NodeKind::kNumber;
    n.integer = integer;
    K3_ASSIGN_OR_RETURN(NumberRange::Bound lo,
                        bound(s, "minimum", "exclusiveMinimum", /*lower=*/true, path));
    K3_ASSIGN_OR_RETURN(NumberRange::Bound hi,
                        bound(s, "maximum", "exclusiveMaximum", /*lower=*/false, path));
    if (!integer) {
      if (lo.present || hi.present) {
        K3_ASSIGN_OR_RETURN(NumberRange range,
                            NumberRange::make(std::move(lo), std::move(hi), path));
        n.range = static_cast<int32_t>(g_->number_ranges.size());
        g_->number_ranges.push_back(std::move(range));
      }
      return g_->add(std::move(n));
    }
    // Integers: the bounds as the nearest integers inside them.
    for (const NumberRange::Bound* b : {&lo, &hi}) {
      if (!b->present) continue;
      const bool lower = b == &lo;
      const char* key = lower ? "minimum" : "maximum";
      const Decimal& d = b->value;
      // |d| has int_len digits before the point; a fraction beyond them?
      const int64_t int_len = std::max<int64_t>(0, d.exp);
      if (int_len > kMaxIntDigits)
        return absl::InvalidArgumentError(cat(path, ": '", key, "' is outside the 64-bit range"));
      __int128 whole = 0;
      for (int64_t i = 0; i < int_len; ++i)
        whole = whole * 10 + (i < static_cast<int64_t>(d.digits.size()) ? d.digits[i] - '0' : 0);
      const bool fraction = static_cast<int64_t>(d.digits.size()) > int_len;
      if (d.neg) whole = -whole;
      // whole is d truncated toward zero; step inside the bound.
      __int128 v = whole;
      if (lower) {
        if (fraction && !d.neg)
          v = whole + 1;  // ceil
        else if (!fraction && b->open)
          v = whole + 1;
      } else {
        if (fraction && d.neg)
          v = whole - 1;  // floor
        else if (!fraction && b->open)
          v = whole - 1;
      }
      if (v > std::numeric_limits<int64_t>::max() || v < std::numeric_limits<int64_t>::min())
        return absl::InvalidArgumentError(cat(path, ": '", key, "' is outside the 64-bit range"));
      if (lower) {
        n.has_min = true;
        n.min_value = static_cast<int64_t>(v);
      } else {
        n.has_max = true;
        n.max_value = static_cast<int64_t>(v);
      }
    }
    if (n.has_min && n.has_max && n.max_value < n.min_value)
      return absl::InvalidArgumentError(cat(path, ": no integer lies within the bounds"));
    return g_->add(std::move(n));
  }

  const json& root_;
  Grammar* g_;
  std::map<std::string, int32_t> refs_;

 public:
  bool has_false_ = false;
};

}  // namespace

int32_t any_value_node(Grammar* g) {
  // Found by shape: the one choice whose first child is an object whose
  // additional values are the choice itself.
  for (size_t i = 0; i < g->nodes.size(); ++i) {
    const Node& n = g->nodes[i];
    if (n.kind == NodeKind::kChoice && n.children.size() == 5 && n.one_of == false) {
      const Node& o = g->nodes[static_cast<size_t>(n.children[0])];
      if (o.kind == NodeKind::kObject && o.properties.empty() &&
          o.additional == static_cast<int32_t>(i))
        return static_cast<int32_t>(i);
    }
  }
  Node choice;
  choice.kind = NodeKind::kChoice;
  const int32_t id = g->add(std::move(choice));
  Node object;
  object.kind = NodeKind::kObject;
  object.additional = id;
  object.key_props.assign(1, 0);
  object.key_prop.assign(1, -1);
  object.key_depth.assign(1, 0);
  Node array;
  array.kind = NodeKind::kArray;
  array.item = id;
  Node string;
  string.kind = NodeKind::kString;
  Node number;
  number.kind = NodeKind::kNumber;
  std::vector<int32_t> children = {g->add(std::move(object)), g->add(std::move(array)),
                                   g->add(std::move(string)), g->add(std::move(number)),
                                   g->add(literal_node({"true", "false", "null"}))};
  g->nodes[static_cast<size_t>(id)].children = std::move(children);
  return id;
}

int32_t any_object_node(Grammar* g) {
  const int32_t any = any_value_node(g);
  return g->nodes[static_cast<size_t>(any)].children[0];
}

StatusOr<int32_t> compile_schema(const json& schema, Grammar* g, bool* has_false) {
  Compiler c(schema, g);
  auto node = c.compile(schema, "#", 0);
  if (has_false != nullptr) *has_false = c.has_false_;
  return node;
}

}  // namespace k3::grammar
