// A grammar over a vocabulary: the per-step mask of allowed token ids.
//
//   auto c = Constraint::create(grammar, vocab);       // shared, thread-safe
//   ConstraintState st(c);                              // one per sequence
//   st.mask(remaining, &mask);  sample;  st.accept(id);
//
// The mask is computed by walking the vocabulary trie depth-first, stepping
// the automaton one byte per trie edge (a subtree is cut where the automaton
// refuses its prefix); the tokens of the vocabulary's string-inner or
// text-inner class are taken whole (one bitmask per code-point limit) when
// the state is at rest inside a string or text, so only the few others are
// walked; inside a string under a pattern, the class's own trie is walked
// stepping only the string's frame. Sequences on top of the state are
// entered first (the same language; a feed then spends one step less of the
// matcher's per-symbol budget, which only grammars forking thousands of
// ways could reach). The result is cached per automaton state with each
// allowed token's distance to acceptance (those above the smallest, grouped
// by distance), so a warm step under any bound is a copy of 64-bit words
// less a few groups.
//
// Cost on o200k (k3ctl bench grammar, thread CPU): warm steps ~10 us p50,
// under 100 us p99; a state's first (cold) mask is mostly under 0.5 ms, a
// string under a pattern ~5 ms (its walk meets every token the pattern
// reads).
//
// Closing in time: with `remaining` tokens left (this one included), a token
// is allowed only if the automaton can still reach acceptance (end of
// message included) within remaining - 1 further tokens, one byte or control
// token per token (every byte is a token of a byte-level BPE vocabulary). So
// a bounded grammar always ends accepted when its shortest completion fits;
// when none fits, the mask is the unbounded one (the reply is cut at the
// limit), and an unbounded grammar may end cut off too.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <vector>

#include "shared/grammar/matcher.h"
#include "shared/grammar/vocab_index.h"
#include "shared/status.h"

namespace k3::grammar {

// Thread-safe (the cache locks).
class Constraint {
 public:
  static std::shared_ptr<const Constraint> create(std::shared_ptr<const Grammar> grammar,
                                                  std::shared_ptr<const VocabIndex> vocab);
  const Matcher& matcher() const { return matcher_; }
  const VocabIndex& vocab() const { return *vocab_; }

  // Inner tokens (of the class `inner`) with code points in [lo, hi] have
  // distance `d` after them.
  struct InnerGroup {
    int64_t d = 0;
    uint32_t lo = 0, hi = 0;
    int64_t count = 0;
  };
  // Allowed tokens at one distance: as ids when few, else as a bitmask.
  struct FarGroup {
    int64_t d = 0;
    std::vector<int32_t> ids;
    std::vector<uint64_t> bits;
    int64_t count = 0;
  };
  struct Entry {
    std::vector<uint64_t> bits;  // allowed ids
    int64_t allowed = 0;
    int64_t max_after = 0;          // the largest distance after an allowed token
    int64_t min_after = kInfinite;  // the smallest
    // The allowed trie and control tokens whose distance after exceeds
    // min_after, grouped by distance, descending (none, with
    // `far_overflow`, when they were too many to keep: a bounded mask is
    // then computed afresh), and the inner tokens' groups, descending.
    std::vector<FarGroup> far;
    bool far_overflow = false;
    const TokenClass* inner = nullptr;
    std::vector<InnerGroup> inner_groups;
  };
  // The cached mask of a state (computed on a miss; *hit says which).
  std::shared_ptr<const Entry> entry(const State& s, bool* hit = nullptr) const;
  // The mask of a state under a bound: tokens after which distance <= bound
  // (far kept when `far` is set).
  Entry compute(const State& s, int64_t bound, bool far = false) const;
  size_t cache_size() const;

 private:
  Constraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const VocabIndex> v)
      : matcher_(g), vocab_(std::move(v)) {}
  struct Walk;
  void walk(const VocabTrie& trie, uint32_t node, size_t depth, Walk* w) const;
  // The walk of a class's trie from a state whose top frame reads the
  // class's tokens whole (a string under a pattern): only that frame steps;
  // `base` is the distance of the frames below it.
  void walk_frame(const VocabTrie& trie, uint32_t node, const Frame& f, int64_t base,
                  Walk* w) const;
  // The class of tokens that keep the state's string or text going, and how
  // many code points they may add; null when the state is not inside one
  // (or inside a string under a pattern: *patterned then names the class,
  // whose tokens the pattern reads one by one).
  const TokenClass* inner_class(const State& s, int64_t* limit, const TokenClass** patterned) const;

  Matcher matcher_;
  std::shared_ptr<const VocabIndex> vocab_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const Entry>> cache_;
  mutable size_t cache_bytes_ = 0;
};

// One sequence's progress. Not thread-safe.
class ConstraintState {
 public:
  explicit ConstraintState(std::shared_ptr<const Constraint> c)
      : c_(std::move(c)), state_(c_->matcher().start()) {}

  // mask[id] = 1 where id is allowed now (mask resized to the vocabulary);
  // returns how many are allowed (0: the grammar cannot go on). *cached:
  // whether the state's mask came from the cache (a warm step).
  int64_t mask(int64_t remaining, std::vector<uint8_t>* mask, bool* cached = nullptr) const;
  // Takes a generated token; InvalidArgument when the grammar refuses it.
  Status accept(int32_t id);
  // The grammar is complete (nothing more may follow).
  bool finished() const;
  const State& state() const { return state_; }

 private:
  std::shared_ptr<const Constraint> c_;
  State state_;
};

}  // namespace k3::grammar
