// Helpers for the XTML tests (shared/chat/): the golden cases
// (tests/data/chat/golden.json, the expected segments written by the
// independent port tests/reference/xtml_ref.py) and the committed tiny
// tokenizer.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "shared/chat/xtml_render.h"
#include "shared/chat/xtml_tokens.h"
#include "tests/test_util.h"

namespace k3::chat::testing {

inline const nlohmann::ordered_json& golden() {
  static const nlohmann::ordered_json g = nlohmann::ordered_json::parse(
      k3::testing::read_file(k3::testing::source_dir() + "/tests/data/chat/golden.json"));
  return g;
}

inline const Tokenizer& tiny() {
  static const Tokenizer t =
      *Tokenizer::load(k3::testing::source_dir() + "/tests/data/tokenizer/tiny");
  return t;
}

// A golden case's render options.
inline RenderOptions options_of(const nlohmann::ordered_json& c) {
  RenderOptions o;
  if (c.contains("options"))
    o.developer_as_system = c["options"].value("developer_as_system", false);
  return o;
}

}  // namespace k3::chat::testing
