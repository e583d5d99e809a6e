#include "engined/model/speculator.h"

#include <algorithm>

namespace k3::engined {

using k3::experts::ExpertSourceStats;

// Auto starts off: it predicts without reading until a judged window shows
// the reads would pay. Starting on cost a short run the waste of a whole
// window (k3-slice, 8 tokens: 1.53 x max(I/O, compute) against 1.11 off).
Speculator::Speculator(SpeculationMode mode) : mode_(mode) {
  st_.on = mode_ == SpeculationMode::kOn;
}

bool Speculator::predict(int input, int64_t layer, const std::vector<int64_t>& experts) {
  pending_layer_[input] = layer;
  pending_[input] = experts;
  std::sort(pending_[input].begin(), pending_[input].end());
  st_.predicted[input] += experts.size();
  if (input == st_.input) win_.predicted += experts.size();
  return st_.on && input == st_.input;
}

void Speculator::observe(int64_t layer, const std::vector<int64_t>& used) {
  if (!predicting()) return;
  bool scored = false;
  for (int i = 0; i < SpeculationStats::kInputs; ++i) {
    if (pending_layer_[i] != layer) continue;
    std::vector<int64_t> both;
    std::set_intersection(pending_[i].begin(), pending_[i].end(), used.begin(), used.end(),
                          std::back_inserter(both));
    st_.correct[i] += both.size();
    if (i == st_.input) win_.correct += both.size();
    pending_layer_[i] = -1;
    scored = true;
  }
  if (!scored) return;
  ++st_.layer_steps;
  st_.actual += used.size();
  win_.actual += used.size();
}

void Speculator::end_chunk(int64_t tokens, const void* source, const ExpertSourceStats& now,
                           uint64_t expert_bytes, bool copies) {
  if (!predicting()) return;
  // Another source (a benchmark's, a placement rebuilt from a new topology)
  // or counters that went back make this window's differences meaningless
  // (unsigned ones wrap): it starts again from now, unjudged.
  const ExpertSourceStats& s = win_.start;
  if (!started_) {
    started_ = true;
    source_ = source;
    win_.start = now;
  } else if (source != source_ || now.requests < s.requests || now.reads < s.reads ||
             now.bytes_read < s.bytes_read || now.speculative_bytes < s.speculative_bytes ||
             now.speculative_hits < s.speculative_hits) {
    source_ = source;
    win_ = Window{};
    win_.start = now;
    return;
  }
  win_.tokens += tokens;
  // The better input so far, from the next chunk on (a window counts the
  // input in use when each prediction was made).
  st_.input = st_.recall(1) > st_.recall(0) ? 1 : 0;
  if (win_.tokens < kWindowTokens) return;
  const ExpertSourceStats& a = win_.start;
  const double eb = static_cast<double>(expert_bytes);
  const double spec_hits = static_cast<double>(now.speculative_hits - a.speculative_hits);
  // What demand needed from the drive: its own reads plus what speculation hid.
  const double demand_drive = static_cast<double>(now.bytes_read - a.bytes_read) + spec_hits * eb;
  const double recall =
      win_.actual > 0 ? static_cast<double>(win_.correct) / static_cast<double>(win_.actual) : 0.0;
  // The demand bytes it hides: while on, the speculative reads demand then
  // used, measured; while off, recall x demand bytes x the share of that
  // a window on really hid (reads are bounded in flight and race the
  // demand request; 1 until a window on has been seen).
  const double could_hide = recall * demand_drive;
  double gain = could_hide * efficiency_;
  double waste = 0;
  if (st_.on) {
    const double hidden = spec_hits * eb;
    gain = hidden;
    if (could_hide > 0) efficiency_ = std::min(1.0, hidden / could_hide);
    waste =
        std::max(0.0, static_cast<double>(now.speculative_bytes - a.speculative_bytes) - hidden);
  } else {
    const double requests = static_cast<double>(now.requests - a.requests);
    const double misses = static_cast<double>(now.reads - a.reads);
    const double miss_rate = requests > 0 ? misses / requests : 0.0;
    // What it would read (its guesses that are not resident) less what
    // that would hide: with every read hiding (efficiency 1), the wrong
    // guesses x expert bytes x miss rate.
    waste = std::max(0.0, static_cast<double>(win_.predicted) * eb * miss_rate - gain);
  }
  // Copies by this host's cores hide nothing (see speculator.h).
  if (copies) gain = 0;
  const bool was_on = st_.on;
  if (mode_ == SpeculationMode::kAuto) st_.on = gain > waste;
  // Off, the share it hid drifts back toward 1 (an eighth of the way per
  // window) so that it is tried again after a while: conditions change.
  if (!was_on) efficiency_ += (1.0 - efficiency_) / 8;
  ++(st_.on ? st_.windows_on : st_.windows_off);
  win_ = Window{};
  win_.start = now;
}

}  // namespace k3::engined
