// libFuzzer target: the JSON Schema compiler (shared/grammar/) on arbitrary
// text, then the automaton it builds fed the input's own bytes, or, when the
// input holds a NUL byte, the schema before it and the text after it (e.g. a
// number against bounds: corpus/schema/number_*). An accepted schema must
// give a grammar with a finite shortest value, whose matcher never crashes
// and steps exactly as its general (forking) walk, and the typed tool-call
// form of it must build too. A bounded number never meets a dead end: after
// every symbol it takes, some number in range can still be completed.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "shared/grammar/matcher.h"
#include "shared/grammar/output_forms.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const size_t nul = input.find('\0');
  const std::string_view text = input.substr(0, nul);
  const std::string_view fed = nul == std::string_view::npos ? text : input.substr(nul + 1);
  const nlohmann::ordered_json schema =
      nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  auto g = k3::grammar::json_document_grammar(&schema);
  if (!g.ok()) return 0;
  k3::grammar::Matcher m(*g), general(*g, /*fast_path=*/false);
  k3::grammar::State st = m.start(), next, other;
  if (m.distance(st) >= k3::grammar::kInfinite) __builtin_trap();
  // The document is the schema's value then end of message.
  const auto& nodes = (*g)->nodes;
  const auto& root = nodes[static_cast<size_t>((*g)->root)];
  const auto& value = nodes[static_cast<size_t>(root.children.at(0))];
  const bool bounded_number = value.kind == k3::grammar::NodeKind::kNumber && value.range >= 0;
  for (unsigned char c : fed) {
    const bool ok = m.feed(st, c, &next);
    if (ok != general.feed(st, c, &other) || (ok && next.key() != other.key())) __builtin_trap();
    if (!ok) break;
    std::swap(st, next);
    if (m.distance(st) >= k3::grammar::kInfinite && bounded_number) __builtin_trap();
  }
  (void)m.feed(st, k3::grammar::kSymEndOfMsg, &next);
  if (schema.is_object()) {
    k3::grammar::OutputSpec spec;
    spec.tool_choice = k3::grammar::OutputSpec::ToolChoice::kRequired;
    spec.tools.push_back({"f", schema});
    (void)k3::grammar::output_grammar(spec);
  }
  return 0;
}
