// A think budget (the Messages API's thinking.budget_tokens) enforced by the
// output constraint's closing-in-time rule (token_constraint.h), the rule
// that already closes the think channel in time for max_tokens: no second
// way of forcing tokens.
//
// Counting, as Anthropic counts thinking tokens: every token generated in
// the think channel before its closing sequence begins (one holding only
// part of a character included). Under a grammar that opens with the think
// channel (output_forms.h) its text holds no control token, so the first
// control token generated is the closing sequence's <|close|>; the sequence
// itself (think_close_markup(): <|close|>think<|sep|><|open|>response<|sep|>,
// its 4 control tokens and the words' tokens) is not counted, and ends at its
// last control token.
//
// The limit is closing in time applied to the think channel: while it is
// open the bound handed to ConstraintState::mask is at most
//   (budget - thinking tokens so far) + (the distance to acceptance from
//   think text at rest, the start state's),
// so a thinking token is allowed only while the budget has one left, and
// one that ends inside a character only when the budget still holds the
// bytes that complete it (one per token, as the rule counts); with none
// left, the closing sequence's <|close|> is the only token that fits, then
// its own tokens (a literal: the only ones the grammar allows). When
// max_tokens' bound is lower it applies, unless it is below the state's
// distance (then the mask would fall back to unbounded and let thinking run
// past the budget: the think bound applies instead, and the reply is cut at
// max_tokens anyway). After the sequence the request's usual bound applies.
//
// Not thread-safe: one per sequence (the engine loop's job).
#pragma once

#include <cstdint>

#include "shared/grammar/token_constraint.h"

namespace k3::engined {

class ThinkBudget {
 public:
  // `budget` thinking tokens at most; 0: no limit (only counts).
  explicit ThinkBudget(int64_t budget = 0);

  // The mask's `remaining` given max_tokens' (and the context's) own,
  // `remaining`; `st` is the sequence's state under `c`. Called before each
  // token is sampled, from the first on (whose state is the start, read
  // here).
  int64_t bound(const grammar::Constraint& c, const grammar::ConstraintState& st,
                int64_t remaining);
  // Counts a generated token (one the grammar accepted).
  void accept(int32_t id, const grammar::VocabIndex& vocab);

  // The think channel is still open (its closing sequence not complete).
  bool open() const { return closing_controls_left_ > 0; }
  // Thinking tokens generated so far.
  int64_t thinking_tokens() const { return thinking_; }

 private:
  int64_t budget_ = 0;
  int64_t thinking_ = 0;
  bool closing_ = false;  // the closing sequence has begun
  int64_t rest_ = -1;     // distance to acceptance from think text at rest (-1: not read yet)
  // Control tokens of the closing sequence not yet generated.
  int closing_controls_left_ = 0;
};

}  // namespace k3::engined
