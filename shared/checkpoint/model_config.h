// Kimi K3's config.json (K3_MODEL.md, "config.json"), parsed and validated.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "shared/status.h"

namespace k3::checkpoint {

// The text model's hyper-parameters. Every field is validated by
// parse_model_config(); a value out of range or inconsistent is refused with a
// message naming the key.
struct ModelConfig {
  int64_t hidden_size = 0;
  int64_t num_hidden_layers = 0;
  int64_t vocab_size = 0;
  int64_t first_k_dense_replace = 0;
  int64_t intermediate_size = 0;  // dense FFN width

  // Gated MLA.
  int64_t num_attention_heads = 0;
  int64_t q_lora_rank = 0;
  int64_t kv_lora_rank = 0;
  int64_t qk_nope_head_dim = 0;
  int64_t qk_rope_head_dim = 0;
  int64_t v_head_dim = 0;

  // LatentMoE.
  int64_t num_experts = 0;
  int64_t num_experts_per_token = 0;
  int64_t moe_intermediate_size = 0;
  int64_t routed_expert_hidden_size = 0;  // the latent width
  int64_t num_shared_experts = 0;
  double routed_scaling_factor = 1.0;

  // AttnRes and activations.
  int64_t attn_res_block_size = 0;
  double activation_situ_beta = 4.0;          // b1
  double activation_situ_linear_beta = 25.0;  // b2
  double rms_norm_eps = 1e-6;

  // KDA (linear_attn_config).
  int64_t kda_num_heads = 0;
  int64_t kda_head_dim = 0;
  int64_t short_conv_kernel_size = 0;
  double gate_lower_bound = -5.0;
  std::vector<bool> layer_is_kda;  // [num_hidden_layers]

  // Special ids, from text_config, else from the root (the published
  // config.json has them in both). eos_token_id is read by the stop rule
  // (checkpoint/stop_tokens.h), its one reader.
  int64_t bos_token_id = -1;  // -1 when absent
  int64_t pad_token_id = -1;  // -1 when absent
  bool tie_word_embeddings = false;

  // Derived sizes.
  int64_t kda_proj() const { return kda_num_heads * kda_head_dim; }
  int64_t mla_q_head_dim() const { return qk_nope_head_dim + qk_rope_head_dim; }
  int64_t shared_intermediate() const { return moe_intermediate_size * num_shared_experts; }
  bool is_kda(int64_t layer) const { return layer_is_kda[static_cast<size_t>(layer)]; }
  bool is_moe(int64_t layer) const { return layer >= first_k_dense_replace; }
  int64_t num_moe_layers() const { return num_hidden_layers - first_k_dense_replace; }
  // Stored bytes of one routed expert (six MXFP4 tensors).
  uint64_t expert_bytes() const;
  // A one-line summary for logs.
  std::string summary() const;
};

// Parses config.json text. Fields are read from `text_config` when present,
// else from the root. A `quantization_config` (in text_config as published,
// or at the root as older synthetic checkpoints wrote it) must describe what
// the routed experts are: compressed-tensors `mxfp4-pack-quantized`, 4-bit
// float weights in groups of 32; anything else is refused naming the key.
StatusOr<ModelConfig> parse_model_config(std::string_view json_text,
                                         std::string_view label = "config.json");
// Reads and parses DIR/config.json.
StatusOr<ModelConfig> load_model_config(const std::string& model_dir);

}  // namespace k3::checkpoint
