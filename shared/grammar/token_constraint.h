// A grammar over a vocabulary: the per-step mask of allowed token ids.
//
//   auto c = Constraint::create(grammar, vocab);       // shared, thread-safe
//   ConstraintState st(c);                              // one per sequence
//   st.mask(remaining, &mask);  sample;  st.accept(id);
//
// The mask is computed by walking the vocabulary trie depth-first, stepping
// the automaton one byte per trie edge (a subtree is cut where the automaton
// refuses its prefix), and cached per automaton state (with the largest
// distance to acceptance among the allowed tokens).
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

#include "shared/base/status.h"
#include "shared/grammar/matcher.h"
#include "shared/grammar/vocab_index.h"

namespace k3::grammar {

// Thread-safe (the cache locks).
class Constraint {
 public:
  static std::shared_ptr<const Constraint> create(std::shared_ptr<const Grammar> grammar,
                                                  std::shared_ptr<const VocabIndex> vocab);
  const Matcher& matcher() const { return matcher_; }
  const VocabIndex& vocab() const { return *vocab_; }

  struct Entry {
    std::vector<uint64_t> bits;  // allowed ids
    int64_t max_after = 0;       // the largest distance after an allowed token
    int64_t allowed = 0;
  };
  // The cached mask of a state (computed on a miss).
  std::shared_ptr<const Entry> entry(const State& s) const;
  // The mask of a state under a bound: tokens after which distance <= bound.
  Entry compute(const State& s, int64_t bound) const;
  size_t cache_size() const;

 private:
  Constraint(std::shared_ptr<const Grammar> g, std::shared_ptr<const VocabIndex> v)
      : matcher_(g), vocab_(std::move(v)) {}
  void walk(const VocabTrie& trie, uint32_t node, const State& s, size_t depth, int64_t bound,
            Entry* out, std::vector<State>* levels) const;
  // The class of tokens that keep the state's string or text going, and how
  // many code points they may add; null when the state is not inside one.
  const TokenClass* inner_class(const State& s, int64_t* limit) const;

  Matcher matcher_;
  std::shared_ptr<const VocabIndex> vocab_;
  mutable std::mutex mu_;
  mutable std::unordered_map<std::string, std::shared_ptr<const Entry>> cache_;
};

// One sequence's progress. Not thread-safe.
class ConstraintState {
 public:
  explicit ConstraintState(std::shared_ptr<const Constraint> c)
      : c_(std::move(c)), state_(c_->matcher().start()) {}

  // mask[id] = 1 where id is allowed now (mask resized to the vocabulary);
  // returns how many are allowed (0: the grammar cannot go on).
  int64_t mask(int64_t remaining, std::vector<uint8_t>* mask) const;
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
