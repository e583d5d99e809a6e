// engined's measured prefill rate: prompt tokens computed per second, the
// figure a request's estimated time to read its prompt (GenerateProgress's
// eta_s) and EngineStats' prefill_tokens_per_second come from.
//
// How it is measured: every engine step that carried prefill pieces is one
// sample, its prefill tokens over its pass's seconds. The whole step's time
// goes to its prefill tokens: decode tokens that rode along in the same pass
// cost one row each, little beside pieces of up to `chunk` rows, and the
// error makes the rate slower, so the estimate errs long, never short.
// Samples are combined as a ratio of exponentially decayed sums (tokens and
// seconds, each multiplied by kDecay before a sample is added): a large piece
// weighs more than a small one (the cost per token falls with the piece's
// size), and the rate follows the machine within a few steps (an expert
// cache warming, a drive shared with other work): a sample's weight halves
// about every three steps. Before the first sample there is no rate.
//
// Prompts read together share it: each step carries one piece of each, so
// each advances at the rate over their number (eta_seconds' `sharing`).
#pragma once

#include <cstdint>

namespace k3::engined {

// Not thread-safe: the engine loop's thread owns it (it copies the rate into
// its counters for other threads).
class PrefillRate {
 public:
  // Each sample's weight in the sums, multiplied in before the next one.
  static constexpr double kDecay = 0.8;

  // A step that computed `tokens` prefill tokens in `seconds`. A step with no
  // prefill token, or a time that is not a positive finite number (a clock
  // that did not move), is no sample.
  void add(int64_t tokens, double seconds);
  // Tokens per second; 0 before the first sample.
  double tokens_per_second() const;
  // Seconds to compute `remaining` more prompt tokens of one prompt while
  // `sharing` prompts (this one included; < 1 counts as 1) are read
  // together: remaining / (rate / sharing). 0 when none remain, negative
  // (-1) while there is no rate yet.
  double eta_seconds(int64_t remaining, int sharing = 1) const;

 private:
  double tokens_ = 0;   // decayed sum of the samples' tokens
  double seconds_ = 0;  // decayed sum of their seconds
};

}  // namespace k3::engined
