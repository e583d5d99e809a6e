// JSON Schema `pattern` (an ECMA-262 regex, matched anywhere in the string
// unless anchored) for a documented subset, compiled to a Glushkov automaton
// over code points whose state is one 64-bit set of positions.
//
// Supported: literal characters and escaped metacharacters (\. \\ \/ \- \^ \$
// \| \( \) \[ \] \{ \} \* \+ \?), \n \t \r \f \v \uXXXX, `.`, classes [...] and
// [^...] with ranges, \d \D \w \W \s \S (inside classes too), groups (...) and
// (?:...), alternation |, quantifiers * + ? {n} {n,} {n,m} (greedy or lazy: the
// same language), `^` only at the start and `$` only at the end. At most 63
// positions after expanding counted repeats. Anything else (lookaround,
// backreferences, \b, named groups, flags) is refused naming it.
#pragma once

#include <cstdint>
#include <string_view>
#include <utility>
#include <vector>

#include "shared/status.h"

namespace k3::grammar {

// Immutable after compile; thread-safe.
class Regex {
 public:
  static StatusOr<Regex> compile(std::string_view pattern);

  using State = uint64_t;  // bit p: position p just matched; bit 63: at the start
  static constexpr State kStart = uint64_t{1} << 63;
  // The positions after reading code point `c`; 0 when no match can follow
  // (dead positions are dropped).
  State step(State s, uint32_t c) const;
  bool accepts(State s) const;
  // Fewest code points from `s` to acceptance (kInfinite-like large when dead).
  int64_t distance(State s) const;

 private:
  struct Position {
    std::vector<std::pair<uint32_t, uint32_t>> ranges;  // inclusive, sorted
  };
  std::vector<Position> positions_;
  std::vector<uint64_t> follow_;   // per position
  uint64_t first_ = 0, last_ = 0;  // position sets
  bool nullable_ = false;
  uint64_t alive_ = 0;           // positions from which a last position is reachable
  std::vector<int64_t> to_end_;  // per position: fewest code points to acceptance
  friend class RegexBuilder;
};

}  // namespace k3::grammar
