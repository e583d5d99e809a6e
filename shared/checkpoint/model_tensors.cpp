#include "shared/checkpoint/model_tensors.h"

#include "absl/strings/str_cat.h"

namespace k3 {

namespace tensor_names {
std::string layer(int64_t l, const std::string& rest) {
  return cat("model.layers.", l, ".", rest);
}
std::string attn(int64_t l, const std::string& rest) {
  return layer(l, "self_attn." + rest);
}
std::string moe(int64_t l, const std::string& rest) {
  return layer(l, "block_sparse_moe." + rest);
}
std::string expert(int64_t l, int64_t e, int w, bool packed) {
  return moe(l, cat("experts.", e, ".w", w, packed ? ".weight_packed" : ".weight_scale"));
}
}  // namespace tensor_names

using namespace tensor_names;

std::vector<ExpectedTensor> expert_tensors(const ModelConfig& c, int64_t l, int64_t e) {
  const int64_t ie = c.moe_intermediate_size, lat = c.routed_expert_hidden_size;
  std::vector<ExpectedTensor> out;
  // w1 (gate) and w3 (up): [ie, lat]; w2 (down): [lat, ie].
  for (int w : {1, 2, 3}) {
    const int64_t rows = w == 2 ? lat : ie, cols = w == 2 ? ie : lat;
    out.push_back({expert(l, e, w, true), {rows, cols / 2}, TensorClass::kExpertPacked});
    out.push_back({expert(l, e, w, false), {rows, cols / 32}, TensorClass::kExpertScale});
  }
  return out;
}

std::vector<ExpectedTensor> dense_tensors(const ModelConfig& c) {
  const int64_t D = c.hidden_size, V = c.vocab_size;
  std::vector<ExpectedTensor> t;
  auto add = [&](std::string name, std::vector<int64_t> shape) {
    t.push_back({std::move(name), std::move(shape), TensorClass::kDense});
  };
  add("model.embed_tokens.weight", {V, D});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    for (const char* n : {"input_layernorm.weight", "post_attention_layernorm.weight",
                          "self_attention_res_norm.weight", "mlp_res_norm.weight"})
      add(layer(l, n), {D});
    add(layer(l, "self_attention_res_proj.weight"), {1, D});
    add(layer(l, "mlp_res_proj.weight"), {1, D});
    if (c.is_kda(l)) {
      const int64_t H = c.kda_num_heads, d = c.kda_head_dim, P = c.kda_proj();
      const int64_t K = c.short_conv_kernel_size;
      for (const char* n : {"q_proj.weight", "k_proj.weight", "v_proj.weight", "g_proj.weight"})
        add(attn(l, n), {P, D});
      add(attn(l, "o_proj.weight"), {D, P});
      for (const char* n : {"q_conv1d.weight", "k_conv1d.weight", "v_conv1d.weight"})
        add(attn(l, n), {P, 1, K});
      add(attn(l, "f_a_proj.weight"), {d, D});
      add(attn(l, "f_b_proj.weight"), {P, d});
      add(attn(l, "b_proj.weight"), {H, D});
      add(attn(l, "dt_bias"), {P});
      t.push_back({attn(l, "A_log"), {H}, TensorClass::kALog});
      add(attn(l, "o_norm.weight"), {d});
    } else {
      const int64_t H = c.num_attention_heads;
      add(attn(l, "q_a_proj.weight"), {c.q_lora_rank, D});
      add(attn(l, "q_a_layernorm.weight"), {c.q_lora_rank});
      add(attn(l, "q_b_proj.weight"), {H * c.mla_q_head_dim(), c.q_lora_rank});
      add(attn(l, "kv_a_proj_with_mqa.weight"), {c.kv_lora_rank + c.qk_rope_head_dim, D});
      add(attn(l, "kv_a_layernorm.weight"), {c.kv_lora_rank});
      add(attn(l, "kv_b_proj.weight"), {H * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank});
      add(attn(l, "g_proj.weight"), {H * c.v_head_dim, D});
      add(attn(l, "o_proj.weight"), {D, H * c.v_head_dim});
    }
    if (!c.is_moe(l)) {
      add(layer(l, "mlp.gate_proj.weight"), {c.intermediate_size, D});
      add(layer(l, "mlp.up_proj.weight"), {c.intermediate_size, D});
      add(layer(l, "mlp.down_proj.weight"), {D, c.intermediate_size});
    } else {
      const int64_t E = c.num_experts, lat = c.routed_expert_hidden_size;
      add(moe(l, "gate.weight"), {E, D});
      add(moe(l, "gate.e_score_correction_bias"), {E});
      add(moe(l, "routed_expert_down_proj.weight"), {lat, D});
      add(moe(l, "routed_expert_up_proj.weight"), {D, lat});
      add(moe(l, "routed_expert_norm.weight"), {lat});
      if (c.num_shared_experts > 0) {
        const int64_t S = c.shared_intermediate();
        add(moe(l, "shared_experts.gate_proj.weight"), {S, D});
        add(moe(l, "shared_experts.up_proj.weight"), {S, D});
        add(moe(l, "shared_experts.down_proj.weight"), {D, S});
      }
    }
  }
  add("model.norm.weight", {D});
  add("model.output_attn_res_norm.weight", {D});
  add("model.output_attn_res_proj.weight", {1, D});
  if (!c.tie_word_embeddings) add("lm_head.weight", {V, D});
  return t;
}

std::vector<ExpectedTensor> all_tensors(const ModelConfig& c) {
  std::vector<ExpectedTensor> t = dense_tensors(c);
  for (int64_t l = c.first_k_dense_replace; l < c.num_hidden_layers; ++l)
    for (int64_t e = 0; e < c.num_experts; ++e)
      for (auto& x : expert_tensors(c, l, e)) t.push_back(std::move(x));
  return t;
}

}  // namespace k3
