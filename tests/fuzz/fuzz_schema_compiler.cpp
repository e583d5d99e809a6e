// libFuzzer target: the JSON Schema compiler (shared/grammar/) on arbitrary
// text, then the automaton it builds fed the input's own bytes. An accepted
// schema must give a grammar with a finite shortest value, whose matcher
// never crashes and steps exactly as its general (forking) walk, and the
// typed tool-call form of it must build too.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "shared/grammar/matcher.h"
#include "shared/grammar/output_forms.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const nlohmann::ordered_json schema =
      nlohmann::ordered_json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (schema.is_discarded()) return 0;
  auto g = k3::grammar::json_document_grammar(&schema);
  if (!g.ok()) return 0;
  k3::grammar::Matcher m(*g), general(*g, /*fast_path=*/false);
  k3::grammar::State st = m.start(), next, other;
  if (m.distance(st) >= k3::grammar::kInfinite) __builtin_trap();
  for (unsigned char c : text) {
    const bool ok = m.feed(st, c, &next);
    if (ok != general.feed(st, c, &other) || (ok && next.key() != other.key())) __builtin_trap();
    if (!ok) break;
    std::swap(st, next);
    (void)m.distance(st);
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
