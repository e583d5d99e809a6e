// The pushdown automaton over a Grammar: a state is a set of stacks of
// frames (several while anyOf/oneOf alternatives are open); feeding a symbol
// steps every stack, forks at choices and drops stacks that cannot continue.
// A state is accepting when some stack has consumed the whole grammar.
//
// Soundness: every accepted symbol string is in the grammar's language.
// oneOf: when alternatives of one oneOf both complete on the same text the
// value is refused (even where an enclosing anyOf would allow it through
// another branch: sound, slightly incomplete). Limits (sound, documented):
// stacks at most kMaxDepth frames deep, at most kMaxStacks live stacks.
//
// Thread-safe: const methods only; the Grammar is shared and immutable.
#pragma once

#include <memory>
#include <string>
#include <vector>

// GCC 12 reports a memcpy bound it cannot prove inside small_vector's copy
// (-Wstringop-overread, a false positive on the inline buffer).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wstringop-overread"
#include <boost/container/small_vector.hpp>
#pragma GCC diagnostic pop

#include "shared/grammar/grammar.h"

namespace k3::grammar {

// One node's progress. All bytes are fields (no padding), so a stack's bytes
// are its identity (the mask cache keys on them).
struct Frame {
  int32_t node = -1;
  int32_t pos = 0;    // object: key trie node (-1: another key); literal: trie node;
                      // seq: next child; oneOf: the alternative
  int64_t count = 0;  // string: code points; array/repeat: items; number: |value|;
                      // object: the property being read (-1: another key)
  uint64_t bits = 0;  // object: properties seen; string: regex state; number: digit counts
  uint8_t phase = 0;
  uint8_t esc = 0;               // string lexer: 0 none, 1 after '\', 2..5 before hex digit 1..4
  uint8_t need = 0;              // UTF-8 continuation bytes still expected
  uint8_t lo = 0x80, hi = 0xBF;  // the next continuation byte's range
  uint8_t spare[3] = {0, 0, 0};
  uint32_t cp = 0;  // the code point being decoded
  uint32_t spare2 = 0;
  bool operator==(const Frame&) const = default;
};
static_assert(sizeof(Frame) == 40);

using Stack = boost::container::small_vector<Frame, 6>;

// A bounded number's cursor (number_range.h) lives in its frame's count and
// bits; phase mirrors the cursor's.
NumberCursor number_cursor(const Frame& f);
void set_number_cursor(Frame* f, const NumberCursor& c);

struct State {
  std::vector<Stack> stacks;
  bool empty() const { return stacks.empty(); }
  // The stacks' bytes: equal states have equal keys.
  std::string key() const;
  void key_into(std::string* k) const;  // the same into *k (its buffer reused)
};

class Matcher {
 public:
  static constexpr size_t kMaxDepth = 96;
  static constexpr size_t kMaxStacks = 32;

  // fast_path: a state of one stack steps in place until it meets a fork
  // (the same result as the general walk, which tests compare it with).
  explicit Matcher(std::shared_ptr<const Grammar> grammar, bool fast_path = true)
      : g_(std::move(grammar)), fast_path_(fast_path) {}

  State start() const;
  // *out = the state after `symbol` (0..259); false when no stack survives.
  // `out` is not `in`.
  bool feed(const State& in, int symbol, State* out) const;
  bool accepting(const State& s) const;
  // The state with every sequence on top of its single stack entered (its
  // next child pushed): it takes exactly the same symbols to the same
  // states, as a sequence pushes that child before reading. Shows the frame
  // that reads next.
  State entered(const State& s) const;
  // Steps `f`, the top frame of its stack, by a byte that the frame can only
  // consume (inside a string or text: not its end, not an escape, no
  // control token); false when refused. As feed() would leave it.
  bool step_inside(Frame* f, int byte) const;
  // The fewest symbols that complete a frame.
  int64_t frame_distance(const Frame& f) const { return frame_rest(f); }
  // Fewest symbols to an accepting state (an estimate that never undercounts
  // by design for the closing-in-time rule; kInfinite when none).
  int64_t distance(const State& s) const;
  const Grammar& grammar() const { return *g_; }

 private:
  struct Tag {
    size_t depth;
    int32_t node;
    int32_t alt;
  };
  struct Out {
    Stack stack;
    std::vector<Tag> tags;
  };
  void feed_stack(Stack s, int symbol, std::vector<Tag> tags, std::vector<Out>* out,
                  int* budget) const;
  enum class Single { kAccept, kReject, kFork };
  Single feed_single(const Stack& in, int symbol, State* out) const;
  void pop_completed(Stack* s, std::vector<Tag>* tags) const;
  // Whether one oneOf completed through two alternatives at once.
  static bool clash(const std::vector<Tag>& tags);
  Frame fresh(int32_t node) const;
  void canonicalize(Stack* s, size_t from) const;
  void canonicalize_frame(Frame* f) const;
  int64_t frame_rest(const Frame& f) const;
  int64_t stack_distance(const Stack& s) const;

  std::shared_ptr<const Grammar> g_;
  bool fast_path_ = true;
};

}  // namespace k3::grammar
