// Helpers for the tokenizer tests (shared/tokenizer/): the committed test data
// (tests/data/tokenizer/) and the tiny vocabulary.
#pragma once

#include <string>

#include "gtest/gtest.h"
#include "shared/status.h"
#include "shared/tokenizer/tokenizer.h"
#include "tests/test_util.h"

namespace k3::tokenizer::testing {

inline std::string data_path(const std::string& name) {
  return k3::testing::source_dir() + "/tests/data/tokenizer/" + name;
}

// The committed tiny vocabulary (a copy of mkmodel's), 256 reserved ids.
inline const Tokenizer& tiny(SplitPattern pattern = SplitPattern::kKimi) {
  auto load = [](SplitPattern p) {
    TokenizerOptions options;
    options.pattern = p;
    return *Tokenizer::load(data_path("tiny"), options);
  };
  static const Tokenizer kimi = load(SplitPattern::kKimi);
  static const Tokenizer o200k = load(SplitPattern::kO200k);
  return pattern == SplitPattern::kKimi ? kimi : o200k;
}

// A tiktoken.model text with the 256 single bytes as ranks 0..255.
inline std::string all_bytes_model() {
  std::string text;
  for (int b = 0; b < 256; ++b) {
    const std::string token(1, static_cast<char>(b));
    static constexpr char kA[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const auto u = static_cast<unsigned char>(b);
    text += kA[u >> 2];
    text += kA[(u & 3) << 4];
    text += "== " + std::to_string(b) + "\n";
  }
  return text;
}

inline std::string error_of(const Status& s) {
  return std::string(s.message());
}

}  // namespace k3::tokenizer::testing
