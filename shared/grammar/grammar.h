// A compiled constraint: a graph of nodes over symbols (bytes 0..255 and the
// four XTML control tokens 256..259) that the matcher (matcher.h) walks with a
// stack of frames, a pushdown automaton. Nodes refer to each other by index,
// so recursion ($ref) is a cycle in the graph. JSON is compact only: no
// insignificant whitespace, and strings in canonical escaping (\" \\ \b \f \n
// \r \t, \u00XX for other control characters, everything else as UTF-8), so a
// decoded string has exactly one accepted spelling.
//
// Built by schema_compiler.h and output_forms.h; immutable afterwards and
// thread-safe to share.
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "shared/grammar/number_range.h"
#include "shared/grammar/regex.h"

namespace k3::grammar {

// Symbols beyond the byte range: the XTML control tokens, then end of input.
inline constexpr int kSymOpen = 256;
inline constexpr int kSymClose = 257;
inline constexpr int kSymSep = 258;
inline constexpr int kSymEndOfMsg = 259;
inline constexpr int kNumSymbols = 260;

// A byte trie of symbol strings (enum/const literals, XTML markup).
struct LiteralTrie {
  struct TrieNode {
    std::vector<std::pair<int, int32_t>> edges;  // symbol -> node, sorted by symbol
    bool terminal = false;
  };
  std::vector<TrieNode> nodes{1};  // nodes[0] is the root
  std::vector<int64_t> rest;       // per node: fewest symbols to a terminal (after finish())
  void add(const std::vector<int>& symbols);
  int32_t child(int32_t node, int symbol) const;  // -1 when absent
  void finish();
};

enum class NodeKind : uint8_t {
  kObject,    // { "key":value,... }
  kArray,     // [ item,... ]
  kString,    // "..." (or raw text up to a control token, for XTML arguments)
  kNumber,    // JSON number, or an integer
  kLiteral,   // one of a set of symbol strings
  kChoice,    // anyOf / oneOf
  kSeq,       // children in order
  kRepeat,    // child repeated [min, max] times, no separator
  kFreeText,  // any UTF-8 text, ends before a control token
};

struct Property {
  std::string name;  // decoded
  int32_t node = -1;
};

struct Node {
  NodeKind kind = NodeKind::kLiteral;
  // kObject
  std::vector<Property> properties;  // at most 64
  uint64_t required = 0;             // bit i: properties[i] is required
  int32_t additional = -1;           // node for other keys' values; -1: none allowed
  LiteralTrie keys;                  // canonical encodings of the names, between the quotes
  std::vector<uint64_t> key_props;   // per keys node: the properties below it
  std::vector<int32_t> key_prop;     // per keys node: the property ending there, or -1
  std::vector<int32_t> key_depth;    // per keys node: its depth
  std::vector<int64_t> key_len;      // per property: its name's canonical spelling's bytes
  std::vector<int64_t> pair_len;     // per property: "name":value at its fewest symbols
  // kArray / kRepeat / kString (length in code points)
  int32_t item = -1;
  int64_t min_count = 0;
  int64_t max_count = std::numeric_limits<int64_t>::max();
  // kString
  int32_t regex = -1;  // index into Grammar::regexes, -1: none
  bool raw = false;    // no quotes or escapes; ends before a control token
  // kNumber
  bool integer = false;
  bool has_min = false, has_max = false;  // integers: within [min_value, max_value]
  int64_t min_value = 0, max_value = 0;
  int32_t range = -1;  // numbers: index into Grammar::number_ranges, -1: unbounded
  // kLiteral
  LiteralTrie literal;
  std::vector<std::string> literal_texts;  // the JSON texts (enum/const), for XTML arguments
  // kChoice / kSeq
  std::vector<int32_t> children;
  bool one_of = false;
  // Fewest symbols of a complete value (filled by Grammar::finish()).
  int64_t min_len = 0;
};

struct Grammar {
  std::vector<Node> nodes;
  std::vector<Regex> regexes;
  std::vector<NumberRange> number_ranges;
  int32_t root = -1;

  int32_t add(Node node);
  // Computes every node's min_len (a fixpoint: recursion settles) and
  // pair_len.
  void finish();
};

// Saturating addition for lengths (kInfinite stays infinite).
inline constexpr int64_t kInfinite = std::numeric_limits<int64_t>::max() / 4;
inline int64_t sat_add(int64_t a, int64_t b) {
  return a >= kInfinite || b >= kInfinite || a + b >= kInfinite ? kInfinite : a + b;
}

inline int64_t sat_mul(int64_t a, int64_t b) {
  if (a == 0 || b == 0) return 0;
  return a >= kInfinite / b ? kInfinite : a * b;
}

// An integer's digits at most (its value fits int64).
inline constexpr int kMaxIntDigits = 19;

// The fewest further digits after an integer's digits so far (|value| v with
// d digits, d = 0: none yet; neg: after '-') that reach a value in the
// node's [minimum, maximum]; -1 when none can.
int64_t integer_extra_digits(const Node& n, bool neg, __int128 v, int64_t d);

// The symbols of a byte string.
std::vector<int> symbols_of(std::string_view bytes);
// The canonical JSON encoding of a decoded string, without the quotes.
std::string canonical_json_string_body(std::string_view decoded);

}  // namespace k3::grammar
