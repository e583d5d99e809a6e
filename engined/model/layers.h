// The layer types of K3 (K3_MODEL.md, "Forward pass"). Each forward takes a
// chunk of T tokens of the RMSNorm-ed input x [T][D], advances the sequence
// state token by token in order, and writes out [T][D]. Every dense matmul is
// batched over the chunk; results are bit-identical to T = 1 calls.
#pragma once

#include <cstdint>

#include "engined/experts/expert_source.h"
#include "engined/model/state.h"
#include "engined/model/weights.h"
#include "shared/checkpoint/expert_index.h"

namespace k3::engine {

// KDA: causal depthwise conv, L2-normalised q/k, per-channel bounded decay,
// delta-rule recurrence, per-head RMSNorm and sigmoid output gate.
void kda_forward(const ModelConfig& c, const KdaWeights& w, KdaState& st, const float* x, int64_t T,
                 float* out);

// Gated MLA with NoPE in absorbed form; appends the chunk to the latent cache
// (ckv + k_r only). Token t of the chunk sits at position pos0 + t.
void mla_forward(const ModelConfig& c, const MlaWeights& w, MlaCache& cache, int64_t pos0,
                 const float* x, int64_t T, float* out);

// Dense SiTU FFN.
void ffn_forward(const ModelConfig& c, const FfnWeights& w, const float* x, int64_t T, float* out);

// LatentMoE: sigmoid router + correction bias, top-k, renormalised weights,
// latent down, routed MXFP4 experts (one asynchronous request per layer step:
// each distinct expert of the chunk computes the rows of its tokens, while
// the shared experts run here), RMSNorm of the aggregate, latent up, plus the
// fused shared experts. `int8_experts` picks the int8-activation kernel over
// the float one.
Status moe_forward(const ModelConfig& c, const MoeWeights& w, int64_t layer, ExpertSource& src,
                   bool int8_experts, const float* x, int64_t T, float* out);

}  // namespace k3::engine
