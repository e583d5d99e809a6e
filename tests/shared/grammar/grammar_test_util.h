// Helpers for the grammar tests: a schema's document grammar fed byte by byte.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "shared/grammar/matcher.h"
#include "shared/grammar/output_forms.h"

namespace k3::grammar::testing {

// Whether the document grammar of `schema` accepts `text` then end of message.
// A schema that does not compile fails the test that asked.
inline bool accepts(const std::string& schema, const std::string& text) {
  const nlohmann::ordered_json s = nlohmann::ordered_json::parse(schema);
  auto g = json_document_grammar(&s);
  if (!g.ok()) {
    ADD_FAILURE() << "schema " << schema << ": " << g.status();
    return false;
  }
  Matcher m(*g);
  State st = m.start(), next;
  for (char c : text) {
    if (!m.feed(st, static_cast<unsigned char>(c), &next)) return false;
    std::swap(st, next);
  }
  if (!m.feed(st, kSymEndOfMsg, &next)) return false;
  return m.accepting(next);
}

// The compile error of a schema ("" when it compiles).
inline std::string compile_error(const std::string& schema) {
  const nlohmann::ordered_json s = nlohmann::ordered_json::parse(schema);
  auto g = json_document_grammar(&s);
  return g.ok() ? "" : std::string(g.status().message());
}

}  // namespace k3::grammar::testing
