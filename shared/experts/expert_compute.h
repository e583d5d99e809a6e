// One routed expert's SiTU GLU over token rows, with the kernels the engine
// uses (shared/kernels/mxfp4.h): the int8-activation kernel or the float one.
// Every source that computes rows calls this, so rows are bit-identical
// wherever they are computed.
#pragma once

#include <cstdint>
#include <vector>

#include "shared/checkpoint/expert_index.h"
#include "shared/checkpoint/model_config.h"

namespace k3::experts {

// The latent activations of a layer step's tokens, as the expert kernel
// takes them.
struct ExpertActivations {
  int64_t tokens = 0;
  bool int8 = true;                 // int8 kernel (q, q_scales) or float kernel (f32)
  const int8_t* q = nullptr;        // {tokens, latent}
  const float* q_scales = nullptr;  // {tokens, latent / 32}
  const float* f32 = nullptr;       // {tokens, latent}
};

// What computing an expert needs to know about its bytes.
struct ExpertShape {
  int64_t num_layers = 0, first_moe_layer = 0, num_experts = 0;
  int64_t latent = 0, intermediate = 0;
  float situ_beta = 0, situ_linear_beta = 0;
  checkpoint::ExpertLayout layout;
  uint64_t bytes = 0;

  static ExpertShape of(const checkpoint::ModelConfig& c);
};

// out[i] = expert(x[rows[i]]), unweighted: {rows.size(), latent}.
void compute_expert_rows(const ExpertShape& shape, const uint8_t* bytes,
                         const ExpertActivations& act, const std::vector<int64_t>& rows,
                         float* out);

}  // namespace k3::experts
