// Pre-tokenization: splits text into the pieces that byte-level BPE encodes one
// at a time (tiktoken's regex split), with PCRE2 (UTF + UCP + JIT).
//
// The reference patterns are written for Rust's regex/fancy-regex crates
// (tiktoken's core). PCRE2 differs in three places, translated here:
//   - `[X&&[^\p{Han}]]` (class intersection) does not exist in PCRE2. Since the
//     general categories partition the code points, X = Lu|Lt|Lm|Lo|M minus Han
//     is written as one negated class: everything that is in no other general
//     category and not Han, `[^\p{Ll}\p{C}\p{N}\p{P}\p{S}\p{Z}\p{sc:Han}]`. A
//     single class (instead of `(?:(?!\p{Han})[X])`) keeps the JIT's repeats
//     flat: no backtracking frame per character of a long word.
//   - Rust's bare `\p{Han}` is the Script property; PCRE2 (>= 10.40) reads a
//     bare script name as Script_Extensions, which also takes in 〆 U+3006,
//     〼 U+303C, 、U+3001, ... So the translation says `\p{sc:Han}`.
//   - Rust's `\s` is `\p{White_Space}`; PCRE2's UCP `\s` also matches U+180E and
//     leaves out nothing, so `\s`/`\S` become `\p{White_Space}`/`\P{White_Space}`.
// Remaining difference: the Unicode version of the tables (PCRE2 10.42: 14.0).
#pragma once

#include <cstddef>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shared/status.h"

namespace k3::tokenizer {

enum class SplitPattern {
  kKimi,   // Kimi K2/K3: o200k with a Han rule and Han removed from the letter classes
  kO200k,  // OpenAI o200k_base
};

// Building blocks of the translated patterns, exposed so tests can check each
// class code point by code point against its definition.
namespace split_classes {
// `[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]`
inline constexpr std::string_view kUpperNotHan = R"([^\p{Ll}\p{C}\p{N}\p{P}\p{S}\p{Z}\p{sc:Han}])";
// `[\p{Ll}\p{Lm}\p{Lo}\p{M}&&[^\p{Han}]]`
inline constexpr std::string_view kLowerNotHan =
    R"([^\p{Lu}\p{Lt}\p{C}\p{N}\p{P}\p{S}\p{Z}\p{sc:Han}])";
// Rust's `\p{Han}` (Script, not Script_Extensions).
inline constexpr std::string_view kHan = R"(\p{sc:Han})";
}  // namespace split_classes

// The PCRE2 source that Splitter::create compiles for `pattern`.
std::string_view split_pattern_source(SplitPattern pattern);

// Strict UTF-8: no overlong forms, no surrogates, nothing above U+10FFFF.
bool is_valid_utf8(std::string_view text);

// A compiled split pattern. Immutable after create(); copies share the compiled
// code. Thread-safe: split() may run on one Splitter from many threads (match
// data and the JIT stack are per thread).
class Splitter {
 public:
  static StatusOr<Splitter> create(SplitPattern pattern);
  // Any PCRE2 pattern, compiled with the same options (UTF, UCP, JIT); for
  // tests and for tokenizers that bring their own pattern.
  static StatusOr<Splitter> create_from_pcre2(std::string_view pattern);

  // Appends to *pieces the matches of the pattern over `utf8_text`, left to
  // right, as tiktoken's find_iter. The pieces cover the text exactly and in
  // order: any text the pattern skips (impossible for the built-in patterns) is
  // a piece of its own, and an empty match never stalls the scan. Text that is
  // not valid UTF-8 (callers check with is_valid_utf8 first) comes back as one
  // piece rather than being handed to PCRE2.
  void split(std::string_view utf8_text, std::vector<std::string_view>* pieces) const;

  // Length of the match anchored at the start of `utf8_text`, or nullopt when
  // the pattern does not match there. `utf8_text` must be valid UTF-8.
  std::optional<size_t> match_prefix(std::string_view utf8_text) const;

 private:
  struct Code;  // owns the pcre2_code (keeps pcre2.h out of this header)
  explicit Splitter(std::shared_ptr<const Code> code) : code_(std::move(code)) {}
  std::shared_ptr<const Code> code_;
};

}  // namespace k3::tokenizer
