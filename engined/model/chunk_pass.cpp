#include "engined/model/chunk_pass.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "engined/model/parallel.h"
#include "shared/base/seconds_since.h"

namespace k3::engined {

using k3::experts::ExpertPriority;
using k3::experts::ExpertRequest;
using k3::experts::ExpertSource;
using k3::experts::ExpertSourceStats;

namespace {

using Clock = std::chrono::steady_clock;
using base::seconds_since;

// Row units are whole tiles of the batched kernels (16 tokens) but the last,
// or, when a tile takes longer than a unit may (beside a decoding session),
// a multiple of kMinRows: on the 896-expert slice (2 cores) a 16-row unit of
// the MoE layer's dense part (attention over 2,048 rows) took 0.15 s,
// twice a decode step, and was most of a decoder's wait.
constexpr int64_t kRowStep = 16, kMinRows = 4;
// Expert groups: at least this many experts (the drive's queue stays deep),
// at most this many (a remote host's step stays short).
// Beside a decoding session (a unit's aim ~0.05 s on the 896-expert slice,
// 2 cores) a group of 8 took 0.13-0.23 s; the next group's reads are
// posted behind each group (experts_unit), so 4 still keep reads queued.
constexpr size_t kMinGroup = 4, kMaxGroup = 128;
// A group grows by at most a quarter on the last one: a group measured fast
// because its reads were posted behind the one before would otherwise be
// followed by one too big to have been read ahead (a long unit: a decoder
// beside the pass waits for it).
size_t grown(size_t last) {
  return last == 0 ? kMaxGroup : last + std::max<size_t>(last / 4, 1);
}

}  // namespace

StatusOr<std::unique_ptr<ChunkPass>> Model::begin_chunk(SequenceState& seq,
                                                        std::vector<int32_t> ids, bool want_logits,
                                                        float expert_top_p) {
  K3_RETURN_IF_ERROR(check_piece(seq, ids));
  if (expert_top_p == 0.0f) expert_top_p = opt_.expert_top_p;
  if (!(expert_top_p > 0.0f && expert_top_p <= 1.0f))
    return absl::InvalidArgumentError(cat("expert_top_p must be in (0, 1], not ", expert_top_p));
  return std::unique_ptr<ChunkPass>(
      new ChunkPass(*this, seq, std::move(ids), want_logits, expert_top_p));
}

ChunkPass::ChunkPass(Model& model, SequenceState& seq, std::vector<int32_t> ids, bool want_logits,
                     float expert_top_p)
    : model_(model),
      w_(model.weights()),
      ids_(std::move(ids)),
      want_logits_(want_logits),
      layers_(model.weights(), &model.times_.attention_seconds),
      status_(1) {
  lane_.seqs = {&seq};
  lane_.T = static_cast<int64_t>(ids_.size());
  lane_.lens = {lane_.T};
  if (expert_top_p < 1.0f) lane_.row_top_p.assign(static_cast<size_t>(lane_.T), expert_top_p);
  layers_.start(lane_, ids_.data());
  for (const LayerWeights& lw : w_.layers)
    units_total_ += static_cast<double>(lane_.T) * (lw.moe ? 3.0 : 1.0);
  layers_.begin_layer(lane_, 0);
}

double ChunkPass::fraction() const {
  if (phase_ == Phase::kDone) return 1.0;
  return units_total_ > 0 ? std::min(units_done_ / units_total_, 1.0) : 0.0;
}

int64_t ChunkPass::next_rows() const {
  const int64_t left = lane_.T - row_;
  if (fixed_rows_ > 0) return std::min(left, fixed_rows_);
  int64_t rows = kRowStep;  // until a rate is measured
  if (seconds_per_row_ > 0) {
    rows = static_cast<int64_t>(unit_seconds_ / seconds_per_row_);
    rows = rows >= kRowStep ? rows / kRowStep * kRowStep
                            : std::max(rows / kMinRows, int64_t{1}) * kMinRows;
  }
  // A remainder smaller than a unit goes with this one.
  return left <= rows + rows / 2 ? left : rows;
}

void ChunkPass::measure_rows(int64_t rows, double seconds) {
  rows_per_unit_ = rows;
  if (rows > 0 && seconds > 0) seconds_per_row_ = seconds / static_cast<double>(rows);
}

StatusOr<bool> ChunkPass::advance(ExpertSource& experts, double budget_seconds,
                                  const std::atomic<bool>* cancel) {
  if (phase_ == Phase::kDone) return true;
  if (!lane_.seqs[0]->valid)
    return absl::FailedPreconditionError("sequence state was left inconsistent by a failed pass");
  // A unit aims at half the budget, and the next runs only when it would
  // end within the budget (taken to last as long as the one before): a call
  // takes about its budget, more only when a unit overruns its aim.
  unit_seconds_ = std::clamp(budget_seconds / 2, 0.02, 1.0);
  const auto t0 = Clock::now();
  const ExpertSourceStats x0 = experts.stats();
  const double attn0 = model_.times_.attention_seconds;
  Status st;
  double last = 0;  // the last unit's seconds: the next is taken to last as long
  do {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      st = absl::CancelledError(cat("cancelled in layer ", layer_));
      break;
    }
    const auto tu = Clock::now();
    st = run_unit(experts);
    last = seconds_since(tu);
  } while (st.ok() && phase_ != Phase::kDone && seconds_since(t0) + last <= budget_seconds);
  const ExpertSourceStats x1 = experts.stats();
  ForwardTimes& times = model_.times_;
  const double wait = x1.wait_seconds - x0.wait_seconds;
  const double compute = x1.compute_seconds - x0.compute_seconds;
  times.expert_wait_seconds += wait;
  times.expert_compute_seconds += compute;
  times.dense_seconds += seconds_since(t0) - (times.attention_seconds - attn0) - compute - wait;
  if (!st.ok()) {
    lane_.seqs[0]->valid = false;
    return st;
  }
  return phase_ == Phase::kDone;
}

Status ChunkPass::run_unit(ExpertSource& experts) {
  switch (phase_) {
    case Phase::kDense:
      return dense_unit();
    case Phase::kExperts:
      return experts_unit(experts);
    case Phase::kCombine:
      return combine_unit();
    case Phase::kDone:
      break;
  }
  return absl::OkStatus();
}

Status ChunkPass::dense_unit() {
  const checkpoint::ModelConfig& c = w_.config;
  const LayerWeights& lw = w_.layers[static_cast<size_t>(layer_)];
  const int64_t r0 = row_, r1 = row_ + next_rows();
  const auto t0 = Clock::now();
  layers_.attend(lane_, layer_, r0, r1);
  if (lw.moe) {
    if (r0 == 0)
      lane_.pending = moe_begin(c, layer_, model_.options().int8_experts, lane_.xn.data(), lane_.T);
    MoeStep step;
    step.top_p = lane_.row_top_p.empty() ? nullptr : lane_.row_top_p.data();
    step.pruned = &model_.times_.experts_pruned;
    moe_route(c, lw.moe_w, *lane_.pending, r0, r1, step);
    moe_shared(c, lw.moe_w, *lane_.pending, r0, r1);
  } else {
    layers_.ffn(lane_, layer_, r0, r1);
    layers_.end_rows(lane_, layer_, r0, r1, &status_);
    if (!status_[0].ok()) return status_[0];
  }
  measure_rows(r1 - r0, seconds_since(t0));
  units_done_ += static_cast<double>(r1 - r0);
  row_ = r1;
  if (row_ < lane_.T) return absl::OkStatus();
  row_ = 0;
  if (!lw.moe) return next_layer();
  n_work_ = moe_plan(c, *lane_.pending, nullptr);
  work_ = 0;
  phase_ = Phase::kExperts;
  return absl::OkStatus();
}

Status ChunkPass::experts_unit(ExpertSource& experts) {
  const checkpoint::ModelConfig& c = w_.config;
  // Groups sized to the unit's time at the rate measured so far.
  size_t group = 2 * kMinGroup;
  if (fixed_experts_ > 0)
    group = fixed_experts_;
  else if (seconds_per_expert_ > 0)
    group = std::clamp(std::min(static_cast<size_t>(unit_seconds_ / seconds_per_expert_),
                                grown(experts_per_unit_)),
                       kMinGroup, kMaxGroup);
  const size_t w0 = work_, w1 = std::min(n_work_, work_ + group);
  const auto t0 = Clock::now();
  if (w1 > w0) {
    K3_RETURN_IF_ERROR(moe_submit_work(experts, *lane_.pending, w0, w1));
    // The next group's bytes, read behind this one's (as many experts as
    // the next group may take, so none of its reads waits; a guess that is
    // almost always right; it never delays demand work, a decoder's step
    // between two units included).
    const size_t w2 = std::min(n_work_, w1 + std::min(grown(w1 - w0), kMaxGroup));
    if (w2 > w1) {
      ExpertRequest r;
      r.layer = layer_;
      r.priority = ExpertPriority::kSpeculative;
      for (int64_t e : moe_work_experts(*lane_.pending, w1, w2))
        if (experts.owns(layer_, e)) r.work.push_back({e, false, {}});
      if (!r.work.empty()) experts.submit(r).IgnoreError();  // the demand reports problems
    }
    K3_RETURN_IF_ERROR(moe_collect(c, experts, *lane_.pending));
  }
  experts_per_unit_ = w1 - w0;
  if (w1 > w0) seconds_per_expert_ = seconds_since(t0) / static_cast<double>(w1 - w0);
  units_done_ += n_work_ > 0 ? 2.0 * static_cast<double>(lane_.T) * static_cast<double>(w1 - w0) /
                                   static_cast<double>(n_work_)
                             : 2.0 * static_cast<double>(lane_.T);
  work_ = w1;
  if (work_ >= n_work_) phase_ = Phase::kCombine;
  return absl::OkStatus();
}

Status ChunkPass::combine_unit() {
  const checkpoint::ModelConfig& c = w_.config;
  const LayerWeights& lw = w_.layers[static_cast<size_t>(layer_)];
  const int64_t r0 = row_, r1 = row_ + next_rows();
  moe_combine(c, lw.moe_w, *lane_.pending, r0, r1, lane_.sub.data());
  layers_.end_rows(lane_, layer_, r0, r1, &status_);
  if (!status_[0].ok()) return status_[0];
  row_ = r1;
  if (row_ < lane_.T) return absl::OkStatus();
  row_ = 0;
  lane_.pending.reset();
  return next_layer();
}

Status ChunkPass::next_layer() {
  ++layer_;
  if (layer_ < static_cast<int64_t>(w_.layers.size())) {
    layers_.begin_layer(lane_, layer_);
    phase_ = Phase::kDense;
    return absl::OkStatus();
  }
  // The head on the last token, and the sequence moves on.
  const checkpoint::ModelConfig& c = w_.config;
  SequenceState& seq = *lane_.seqs[0];
  if (want_logits_) {
    std::vector<float> hn(static_cast<size_t>(c.hidden_size));
    layers_.head_input(lane_, lane_.T - 1, hn.data());
    logits_.assign(static_cast<size_t>(c.vocab_size), 0.0f);
    linear(w_.lm_head, hn.data(), 1, logits_.data());
    for (float v : logits_)
      if (!std::isfinite(v))
        return absl::DataLossError(
            "non-finite logits (a corrupt lm_head? k3ctl verify checks the checkpoint)");
  }
  seq.position += lane_.T;
  model_.times_.tokens += lane_.T;
  phase_ = Phase::kDone;
  return absl::OkStatus();
}

}  // namespace k3::engined
