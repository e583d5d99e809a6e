// Every weight of the K3 text model except the routed experts, held in RAM.
// Every weight is bound by (role, layer) through the one tensor table of
// shared/checkpoint/model_tensors.h, its dtype and shape checked where it is
// bound (shared/checkpoint/container.h: find_stored). From a source checkpoint
// the big matrices are quantized at load (shared/kernels/dense.h), read once
// and converted in row blocks: no full f32 copy of a matrix ever exists. From a
// container (`k3ctl repack`) they are taken prepared, as stored; a matrix
// stored at 8 bits and asked for at 4 is downcast at load (each row
// dequantized as the int8 kernels see it, then quantized to int4 per 64-column
// group: not the bits of quantizing the source straight to int4); asking for
// more bits than the container holds is refused.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "engined/model/weight_matrix.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/dtype.h"
#include "shared/checkpoint/model_config.h"
#include "shared/status.h"

namespace k3::engined {

// Bits of the load-time quantization (32 = f32, 8 = int8 per row, 4 = int4 per
// 64-column group), per class of matrix.
struct QuantConfig {
  int dense_bits = 4;  // KDA projections, latent down/up, shared experts, dense FFN
  int mla_bits = 8;    // MLA projections
  int head_bits = 8;   // lm_head
  // Tensors of the checkpoint the model does not use (outside the vision
  // tower) are an error instead of a warning.
  bool strict = false;
  // Map a container's prepared matrices, their scales and the embedding
  // read-only (engined/model/mapped_file.h) instead of copying them; refused
  // for a big matrix that would need conversion (a source checkpoint, a
  // downcast). The small tensors converted at load (f_a / f_b, b_proj,
  // router, kv_b dequantized, exp(A_log), res_norm * res_proj, norms) stay
  // private.
  bool mmap = false;
};

struct KdaWeights {
  WeightMatrix q, k, v, g;                    // [P, D]
  WeightMatrix o;                             // [D, P]
  WeightMatrix f_a;                           // [d, D] (f32: small and sensitive)
  WeightMatrix f_b;                           // [P, d] (f32)
  WeightMatrix b;                             // [H, D] (f32)
  std::vector<float> q_conv, k_conv, v_conv;  // [P * K], tap K-1 = current token
  std::vector<float> dt_bias;                 // [P]
  std::vector<float> a;                       // exp(A_log[h]) for the first H entries
  std::vector<float> o_norm;                  // [d]
};

struct MlaWeights {
  WeightMatrix q_a;   // [q_lora, D]
  WeightMatrix q_b;   // [H * (nope + rope), q_lora]
  WeightMatrix kv_a;  // [kv_lora + rope, D]
  WeightMatrix g;     // [H * v, D]
  WeightMatrix o;     // [D, H * v]
  std::vector<float> q_a_norm, kv_a_norm;
  // kv_b_proj [H * (nope + v), kv_lora] as f32 (after the mla_bits round trip,
  // so its numerics match the setting): absorbed into the query and output
  // sides at decode.
  std::vector<float> kv_b;
};

struct FfnWeights {
  WeightMatrix gate, up;  // [I, D]
  WeightMatrix down;      // [D, I]
};

struct MoeWeights {
  WeightMatrix router;          // [E, D] f32
  std::vector<float> bias;      // e_score_correction_bias [E]
  WeightMatrix lat_down;        // [latent, D]
  WeightMatrix lat_up;          // [D, latent]
  std::vector<float> lat_norm;  // [latent]
  bool has_shared = false;
  WeightMatrix sh_gate, sh_up, sh_down;  // [S, D], [S, D], [D, S]
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
  checkpoint::ModelConfig config;
  QuantConfig quant;
  // The embedding stays in its stored dtype; rows are converted on lookup.
  checkpoint::DType embed_dtype = checkpoint::DType::kBF16;
  std::vector<uint8_t> embed;
  const uint8_t* embed_view = nullptr;  // --mmap: in a mapping, instead of `embed`
  std::vector<LayerWeights> layers;
  std::vector<float> final_norm;  // [D]
  std::vector<float> out_sw;      // output_attn_res_norm * output_attn_res_proj [D]
  WeightMatrix lm_head;           // [V, D]
  size_t resident_bytes = 0;      // private (copied or converted) weight bytes
  size_t mapped_bytes = 0;        // weight bytes viewed in read-only mappings
  std::vector<std::shared_ptr<const void>> mappings;

  // Converts the embedding row of `id` into out[D].
  void embed_row(int64_t id, float* out) const;
};

// Binds, loads and (from a source checkpoint) quantizes every dense weight.
StatusOr<std::unique_ptr<ModelWeights>> load_weights(const checkpoint::Checkpoint& ck,
                                                     const checkpoint::ModelConfig& c,
                                                     const QuantConfig& q);

}  // namespace k3::engined
