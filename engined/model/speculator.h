// Speculative lookahead (issue 11 item 1): layer L+1's router applied to a
// hidden state layer L already has predicts L+1's experts, so their reads
// can be posted before L+1's attention and dense work. Two inputs are
// measured on the model in use, every step: (0) layer L's MoE (or FFN) input
// and (1) layer L's output before L+1's AttnRes mix (RMS-normalised with
// L+1's post-attention norm); the one with the better recall so far (judged
// after every forward chunk) is the one posted.
//
// Auto, judged per window of kWindowTokens tokens: it starts off (predicting
// without reading) and is on for the next window only while the demand
// bytes it hides exceed the bytes it wastes. On, both are measured: the
// speculative reads a demand request then used, and those it never used.
// Off, both are estimated: recall x (the demand bytes the drive had to
// deliver) x the share of that the last window on really hid (speculative
// reads are bounded in flight and race the demand request, so a right guess
// is not always a hidden read; 1 before any window on), against the wrong
// guesses x expert bytes x the fraction of demand experts that were not
// resident, less that hidden share. While off it still predicts (without
// reading), and the share drifts back toward 1 (an eighth of the way per
// window off), so it comes back on when it would pay.
//
// A source whose reads are copies made by this host's cores (expertd reading
// buffered, from the page cache: ExpertSource::reads_use_host_cores) hides
// nothing: a copy posted early runs on the cores the compute needs, so it
// only moves work (and a wrong guess adds some). Auto counts its gain as 0
// there and stays off (still predicting); `on` forces reads (e.g. a
// filesystem that refuses O_DIRECT over files that are not in the page
// cache, where a buffered read also waits on the drive).
//
// Speculation changes what is read, never what is computed.
#pragma once

#include <cstdint>
#include <vector>

#include "shared/experts/expert_source.h"

namespace k3::engined {

enum class SpeculationMode {
  kOff,   // no prediction, no speculative reads
  kAuto,  // speculative reads while they pay (the default)
  kOn,    // speculative reads always (tests, measurements)
};

struct SpeculationStats {
  static constexpr int kInputs = 2;          // 0: MoE input of L, 1: output of L
  uint64_t layer_steps = 0;                  // MoE layer steps a prediction was scored on
  uint64_t actual = 0;                       // experts those steps used (sum over steps)
  uint64_t predicted[kInputs] = {};          // experts predicted, per input
  uint64_t correct[kInputs] = {};            // ... of them used by the step
  uint64_t posted = 0;                       // experts asked for speculatively
  uint64_t windows_on = 0, windows_off = 0;  // judged windows ending on / off
  bool on = false;                           // posting reads now
  int input = 0;                             // the input posted from
  double recall(int input) const {
    return actual > 0 ? static_cast<double>(correct[input]) / static_cast<double>(actual) : 0.0;
  }
};

// Not thread-safe: the forward pass owns it.
class Speculator {
 public:
  static constexpr int64_t kWindowTokens = 16;

  explicit Speculator(SpeculationMode mode = SpeculationMode::kAuto);
  SpeculationMode mode() const { return mode_; }
  // Whether predictions are made at all.
  bool predicting() const { return mode_ != SpeculationMode::kOff; }
  // Records the experts predicted for MoE layer `layer` from `input`;
  // returns whether they should be posted now (the input in use, speculation
  // on).
  bool predict(int input, int64_t layer, const std::vector<int64_t>& experts);
  void count_posted(size_t n) { st_.posted += n; }
  // MoE layer `layer` ran with `used` (sorted, distinct): scores the
  // predictions made for it.
  void observe(int64_t layer, const std::vector<int64_t>& used);
  // After a forward chunk of `tokens` tokens; `now` is the stats of
  // `source`, the expert source the chunk ran on. Closes a window every
  // kWindowTokens tokens. A window is judged over one source: another
  // source, or one whose counters went back (a placement rebuilt), restarts
  // it unjudged. `copies`: the source's reads use this host's cores.
  void end_chunk(int64_t tokens, const void* source, const k3::experts::ExpertSourceStats& now,
                 uint64_t expert_bytes, bool copies);
  const SpeculationStats& stats() const { return st_; }

 private:
  struct Window {
    uint64_t actual = 0, predicted = 0, correct = 0;
    k3::experts::ExpertSourceStats start;
    int64_t tokens = 0;
  };
  SpeculationMode mode_;
  SpeculationStats st_;
  // Pending predictions per input: layer and experts (sorted).
  int64_t pending_layer_[SpeculationStats::kInputs] = {-1, -1};
  std::vector<int64_t> pending_[SpeculationStats::kInputs];
  Window win_;
  const void* source_ = nullptr;  // of the window
  double efficiency_ = 1.0;       // hidden / (recall x demand bytes), last window on
  bool started_ = false;
};

}  // namespace k3::engined
