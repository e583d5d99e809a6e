// A big prefill chunk of one sequence, run in parts (issue 26 item 2): the
// chunk goes through the layers as one forward pass would (layer-major,
// each MoE layer's distinct experts read once for all the chunk's tokens),
// but its work is cut into units a caller runs a time budget of at a time,
// with nothing in flight between two calls: the engine loop runs the other
// sessions' decode steps on the same expert source in between.
//
// A layer's units: its dense part over ranges of rows (AttnRes, attention,
// routing, the latent projection and the shared experts, or the FFN), then
// for a MoE layer its routed experts in groups (each group's experts read
// and computed for all their rows, collected, released: the layer's union
// of experts never needs to fit the cache), then the combination over
// ranges of rows. Every unit is row-wise or token-ordered (lane.h), so the
// outputs are those of Model::forward over the same tokens, bit for bit,
// whatever the budget.
#pragma once

#include <atomic>
#include <cstdint>
#include <vector>

#include "engined/model/lane.h"
#include "engined/model/model.h"

namespace k3::engined {

class ChunkPass {
 public:
  // Runs units while the next would end within `budget_seconds` (taken to
  // last as long as the one before; at least one unit) until the pass
  // ends; true when it ended. An error (the expert source's, a
  // non-finite hidden state, CANCELLED when `cancel` became true before a
  // unit) ends the pass with the sequence's state invalid.
  StatusOr<bool> advance(k3::experts::ExpertSource& experts, double budget_seconds,
                         const std::atomic<bool>* cancel = nullptr);
  bool done() const { return phase_ == Phase::kDone; }
  // The share of the pass's work done, in [0, 1] (units weighted by rows).
  double fraction() const;
  int64_t tokens() const { return lane_.T; }
  // After the pass, with logits asked for: the last token's [vocab].
  const std::vector<float>& logits() const { return logits_; }
  // Row ranges and expert groups of the last units (tests, benches).
  int64_t rows_per_unit() const { return rows_per_unit_; }
  size_t experts_per_unit() const { return experts_per_unit_; }
  // Fixes the units' sizes instead of fitting them to the budget at the
  // rates measured (tests: any sizes give the same bits). 0: measured.
  void fix_units(int64_t rows, size_t experts) {
    fixed_rows_ = rows;
    fixed_experts_ = experts;
  }

 private:
  friend class Model;
  ChunkPass(Model& model, SequenceState& seq, std::vector<int32_t> ids, bool want_logits,
            float expert_top_p);
  enum class Phase { kDense, kExperts, kCombine, kDone };
  // One unit of work; the phase moves on when a part ends.
  Status run_unit(k3::experts::ExpertSource& experts);
  Status dense_unit();
  Status experts_unit(k3::experts::ExpertSource& experts);
  Status combine_unit();
  // The layer's rows are done: the next layer, or the head at the end
  // (DATA_LOSS when the logits are not finite).
  Status next_layer();
  // The rows of the next row unit, sized so a unit takes about
  // unit_seconds_ at the rate measured so far.
  int64_t next_rows() const;
  void measure_rows(int64_t rows, double seconds);

  Model& model_;
  const ModelWeights& w_;
  std::vector<int32_t> ids_;
  bool want_logits_;
  Lane lane_;
  LaneLayers layers_;
  std::vector<Status> status_;  // the piece's (lane.h's end_rows)
  std::vector<float> logits_;

  Phase phase_ = Phase::kDense;
  int64_t layer_ = 0;
  int64_t row_ = 0;                          // rows of the current part done
  size_t work_ = 0;                          // work items of the current MoE layer done
  size_t n_work_ = 0;                        // ... of how many
  double units_done_ = 0, units_total_ = 0;  // progress, in rows
  double unit_seconds_ = 0.25;               // what a unit aims at
  double seconds_per_row_ = 0;               // measured on dense units
  double seconds_per_expert_ = 0;            // measured on expert units
  int64_t rows_per_unit_ = 0;
  size_t experts_per_unit_ = 0;
  int64_t fixed_rows_ = 0;
  size_t fixed_experts_ = 0;
};

}  // namespace k3::engined
