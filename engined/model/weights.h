// Every weight of the K3 text model except the routed experts, held in RAM.
// The big matrices are quantized at load (shared/kernels/dense.h), read once
// and converted in row blocks: no full f32 copy of a matrix ever exists.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "shared/base/status.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/dtype.h"
#include "shared/checkpoint/model_config.h"
#include "shared/kernels/dense.h"

namespace k3::engine {

using kernels::DenseMatrix;

// Bits of the load-time quantization (32 = f32, 8 = int8 per row, 4 = int4 per
// 64-column group), per class of matrix.
struct QuantConfig {
  int dense_bits = 4;  // KDA projections, latent down/up, shared experts, dense FFN
  int mla_bits = 8;    // MLA projections
  int head_bits = 8;   // lm_head
};

struct KdaWeights {
  DenseMatrix q, k, v, g;                     // [P, D]
  DenseMatrix o;                              // [D, P]
  DenseMatrix f_a;                            // [d, D] (f32: small and sensitive)
  DenseMatrix f_b;                            // [P, d] (f32)
  DenseMatrix b;                              // [H, D] (f32)
  std::vector<float> q_conv, k_conv, v_conv;  // [P * K], tap K-1 = current token
  std::vector<float> dt_bias;                 // [P]
  std::vector<float> a;                       // exp(A_log[h]) for the first H entries
  std::vector<float> o_norm;                  // [d]
};

struct MlaWeights {
  DenseMatrix q_a;   // [q_lora, D]
  DenseMatrix q_b;   // [H * (nope + rope), q_lora]
  DenseMatrix kv_a;  // [kv_lora + rope, D]
  DenseMatrix g;     // [H * v, D]
  DenseMatrix o;     // [D, H * v]
  std::vector<float> q_a_norm, kv_a_norm;
  // kv_b_proj [H * (nope + v), kv_lora] as f32 (after the mla_bits round trip,
  // so its numerics match the setting): absorbed into the query and output
  // sides at decode.
  std::vector<float> kv_b;
};

struct FfnWeights {
  DenseMatrix gate, up;  // [I, D]
  DenseMatrix down;      // [D, I]
};

struct MoeWeights {
  DenseMatrix router;           // [E, D] f32
  std::vector<float> bias;      // e_score_correction_bias [E]
  DenseMatrix lat_down;         // [latent, D]
  DenseMatrix lat_up;           // [D, latent]
  std::vector<float> lat_norm;  // [latent]
  bool has_shared = false;
  DenseMatrix sh_gate, sh_up, sh_down;  // [S, D], [S, D], [D, S]
};

struct LayerWeights {
  bool kda = false;
  bool moe = false;
  std::vector<float> in_norm, post_norm;  // [D]
  std::vector<float> asw, msw;            // res_norm * res_proj [D]
  KdaWeights kda_w;
  MlaWeights mla_w;
  FfnWeights ffn;
  MoeWeights moe_w;
};

struct ModelWeights {
  ModelConfig config;
  QuantConfig quant;
  // The embedding stays in its stored dtype; rows are converted on lookup.
  DType embed_dtype = DType::kBF16;
  std::vector<uint8_t> embed;
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [D]
  std::vector<float> out_sw;      // output_attn_res_norm * output_attn_res_proj [D]
  DenseMatrix lm_head;            // [V, D]
  size_t resident_bytes = 0;

  // Converts the embedding row of `id` into out[D].
  void embed_row(int64_t id, float* out) const;
};

// Loads and quantizes. `progress` is called after each layer with (done, total).
StatusOr<std::unique_ptr<ModelWeights>> load_weights(const Checkpoint& ck, const ModelConfig& c,
                                                     const QuantConfig& q);

}  // namespace k3::engine
