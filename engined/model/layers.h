// The layer types of K3 (K3_MODEL.md, "Forward pass"). Each forward takes a
// chunk of T tokens of the RMSNorm-ed input x [T][D], advances the sequence
// state token by token in order, and writes out [T][D]. Every dense matmul is
// batched over the chunk; results are bit-identical to T = 1 calls.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "engined/model/state.h"
#include "engined/model/weights.h"
#include "shared/checkpoint/expert_index.h"
#include "shared/experts/expert_source.h"

namespace k3::engined {

// KDA: causal depthwise conv, L2-normalised q/k, per-channel bounded decay,
// delta-rule recurrence, per-head RMSNorm and sigmoid output gate.
void kda_forward(const checkpoint::ModelConfig& c, const KdaWeights& w, KdaState& st,
                 const float* x, int64_t T, float* out);

// Gated MLA with NoPE in absorbed form; appends the chunk to the latent cache
// (ckv + k_r only). Token t of the chunk sits at position pos0 + t.
void mla_forward(const checkpoint::ModelConfig& c, const MlaWeights& w, MlaCache& cache,
                 int64_t pos0, const float* x, int64_t T, float* out);

// Dense SiTU FFN.
void ffn_forward(const checkpoint::ModelConfig& c, const FfnWeights& w, const float* x, int64_t T,
                 float* out);

// LatentMoE: sigmoid router + correction bias, top-k, renormalised weights,
// latent down, routed MXFP4 experts (one asynchronous request per layer step:
// each distinct expert of the chunk computes the rows of its tokens, while
// the shared experts run here), RMSNorm of the aggregate, latent up, plus the
// fused shared experts. `int8_experts` picks the int8-activation kernel over
// the float one.
//
// `step` adds, per layer step: top-p pruning per token row (expert_top_p),
// a hook run as soon as the routed request is out (speculative reads for
// the next layer go behind it), and what the step used.
struct MoeStep {
  const float* top_p = nullptr;          // [T]; nullptr (or 1.0) = off
  std::function<void()> after_submit;    // may be empty
  std::vector<int64_t>* used = nullptr;  // out: the distinct experts used, sorted
  uint64_t* pruned = nullptr;            // out: += experts top-p dropped
};
Status moe_forward(const checkpoint::ModelConfig& c, const MoeWeights& w, int64_t layer,
                   experts::ExpertSource& src, bool int8_experts, const float* x, int64_t T,
                   float* out, const MoeStep& step = {});

// moe_forward in two halves, for a caller that works on something else while
// the routed request is out (the forward pass's second sequence group):
// moe_submit routes, projects to the latent, and posts the request;
// moe_finish runs the shared experts, waits for the routed rows and writes
// `out`. Between the two, `x` must stay valid and no other demand request
// may go to `src`. moe_submit then moe_finish is moe_forward, bit for bit.
struct MoePending;
struct MoePendingDeleter {
  void operator()(MoePending* p) const;
};
using MoeInFlight = std::unique_ptr<MoePending, MoePendingDeleter>;
StatusOr<MoeInFlight> moe_submit(const checkpoint::ModelConfig& c, const MoeWeights& w,
                                 int64_t layer, experts::ExpertSource& src, bool int8_experts,
                                 const float* x, int64_t T, const MoeStep& step = {});
Status moe_finish(const checkpoint::ModelConfig& c, const MoeWeights& w, experts::ExpertSource& src,
                  MoeInFlight pending, float* out);

// The same step in its phases, for a caller that runs a big chunk's layer in
// parts (chunk_pass.h): moe_submit is begin, route [0, T), plan, submit all
// the work; moe_finish is shared [0, T), collect, combine [0, T). Routing,
// the shared experts and the combination are row-wise, so any split into
// row ranges gives the same bits; so does any split of the work into
// groups, each submitted and collected before the next.
MoeInFlight moe_begin(const checkpoint::ModelConfig& c, int64_t layer, bool int8_experts,
                      const float* x, int64_t T);
// Rows [r0, r1): routing (step.top_p is indexed by row; step.pruned counts)
// and the latent projection of the experts' activations.
void moe_route(const checkpoint::ModelConfig& c, const MoeWeights& w, MoePending& p, int64_t r0,
               int64_t r1, const MoeStep& step);
// Once every row is routed: the distinct experts (sorted) and their rows;
// returns how many (work items), and fills `used` when given.
size_t moe_plan(const checkpoint::ModelConfig& c, MoePending& p, std::vector<int64_t>* used);
// Posts work items [w0, w1) as the demand request.
Status moe_submit_work(experts::ExpertSource& src, MoePending& p, size_t w0, size_t w1);
// Takes every completion of the work in flight.
Status moe_collect(const checkpoint::ModelConfig& c, experts::ExpertSource& src, MoePending& p);
// The shared experts of rows [r0, r1).
void moe_shared(const checkpoint::ModelConfig& c, const MoeWeights& w, MoePending& p, int64_t r0,
                int64_t r1);
// Rows [r0, r1) of the output (out is the whole {T, D}): the routed rows
// weighted and summed in slot order, normalised, projected up, plus the
// shared experts'. Needs every work item collected.
void moe_combine(const checkpoint::ModelConfig& c, const MoeWeights& w, const MoePending& p,
                 int64_t r0, int64_t r1, float* out);
// The work items of a planned step and the experts of items [w0, w1).
size_t moe_work_count(const MoePending& p);
std::vector<int64_t> moe_work_experts(const MoePending& p, size_t w0, size_t w1);

// The experts `w`'s router would pick (top-k on the biased scores) for any
// of the rows x [T][D]: their union, sorted. What speculation posts.
std::vector<int64_t> predict_experts(const checkpoint::ModelConfig& c, const MoeWeights& w,
                                     const float* x, int64_t T);

// One token's selection from its sigmoid scores `score` [E] (top-k on
// score + bias, ties to the lower id), pruned to top-p `p` when p < 1:
// ordered by raw score, kept until their share reaches p (the crossing one
// included, at least one). For tests of the rule.
std::vector<int64_t> top_p_selection(const float* score, const float* bias, int64_t E, int64_t k,
                                     float p);

}  // namespace k3::engined
