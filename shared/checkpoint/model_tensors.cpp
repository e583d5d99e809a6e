#include "shared/checkpoint/model_tensors.h"

#include "absl/strings/str_cat.h"

namespace k3::checkpoint {

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
    out.push_back({expert(l, e, w, true),
                   {rows, cols / 2},
                   TensorClass::kExpertPacked,
                   TensorRole::kExpert,
                   l});
    out.push_back({expert(l, e, w, false),
                   {rows, cols / 32},
                   TensorClass::kExpertScale,
                   TensorRole::kExpert,
                   l});
  }
  return out;
}

std::vector<ExpectedTensor> dense_tensors(const ModelConfig& c) {
  using R = TensorRole;
  using Q = QuantGroup;
  const int64_t D = c.hidden_size, V = c.vocab_size;
  std::vector<ExpectedTensor> t;
  int64_t l = -1;  // the layer being listed
  // One call per tensor: role, name, shape and how it is quantized.
  auto add = [&](R role, std::string name, std::vector<int64_t> shape, Q quant = Q::kNone,
                 TensorClass cls = TensorClass::kDense) {
    t.push_back({std::move(name), std::move(shape), cls, role, l, quant});
  };
  add(R::kEmbed, "model.embed_tokens.weight", {V, D});
  for (l = 0; l < c.num_hidden_layers; ++l) {
    add(R::kInNorm, layer(l, "input_layernorm.weight"), {D});
    add(R::kPostNorm, layer(l, "post_attention_layernorm.weight"), {D});
    add(R::kAttnResNorm, layer(l, "self_attention_res_norm.weight"), {D});
    add(R::kMlpResNorm, layer(l, "mlp_res_norm.weight"), {D});
    add(R::kAttnResProj, layer(l, "self_attention_res_proj.weight"), {1, D});
    add(R::kMlpResProj, layer(l, "mlp_res_proj.weight"), {1, D});
    if (c.is_kda(l)) {
      const int64_t H = c.kda_num_heads, d = c.kda_head_dim, P = c.kda_proj();
      const int64_t K = c.short_conv_kernel_size;
      add(R::kKdaQ, attn(l, "q_proj.weight"), {P, D}, Q::kDense);
      add(R::kKdaK, attn(l, "k_proj.weight"), {P, D}, Q::kDense);
      add(R::kKdaV, attn(l, "v_proj.weight"), {P, D}, Q::kDense);
      add(R::kKdaG, attn(l, "g_proj.weight"), {P, D}, Q::kDense);
      add(R::kKdaO, attn(l, "o_proj.weight"), {D, P}, Q::kDense);
      add(R::kKdaQConv, attn(l, "q_conv1d.weight"), {P, 1, K});
      add(R::kKdaKConv, attn(l, "k_conv1d.weight"), {P, 1, K});
      add(R::kKdaVConv, attn(l, "v_conv1d.weight"), {P, 1, K});
      add(R::kKdaFA, attn(l, "f_a_proj.weight"), {d, D});
      add(R::kKdaFB, attn(l, "f_b_proj.weight"), {P, d});
      add(R::kKdaB, attn(l, "b_proj.weight"), {H, D});
      add(R::kKdaDtBias, attn(l, "dt_bias"), {P});
      add(R::kKdaALog, attn(l, "A_log"), {H}, Q::kNone, TensorClass::kALog);
      add(R::kKdaONorm, attn(l, "o_norm.weight"), {d});
    } else {
      const int64_t H = c.num_attention_heads;
      add(R::kMlaQA, attn(l, "q_a_proj.weight"), {c.q_lora_rank, D}, Q::kMla);
      add(R::kMlaQANorm, attn(l, "q_a_layernorm.weight"), {c.q_lora_rank});
      add(R::kMlaQB, attn(l, "q_b_proj.weight"), {H * c.mla_q_head_dim(), c.q_lora_rank}, Q::kMla);
      add(R::kMlaKvA, attn(l, "kv_a_proj_with_mqa.weight"),
          {c.kv_lora_rank + c.qk_rope_head_dim, D}, Q::kMla);
      add(R::kMlaKvANorm, attn(l, "kv_a_layernorm.weight"), {c.kv_lora_rank});
      add(R::kMlaKvB, attn(l, "kv_b_proj.weight"),
          {H * (c.qk_nope_head_dim + c.v_head_dim), c.kv_lora_rank}, Q::kMla);
      add(R::kMlaG, attn(l, "g_proj.weight"), {H * c.v_head_dim, D}, Q::kMla);
      add(R::kMlaO, attn(l, "o_proj.weight"), {D, H * c.v_head_dim}, Q::kMla);
    }
    if (!c.is_moe(l)) {
      add(R::kFfnGate, layer(l, "mlp.gate_proj.weight"), {c.intermediate_size, D}, Q::kDense);
      add(R::kFfnUp, layer(l, "mlp.up_proj.weight"), {c.intermediate_size, D}, Q::kDense);
      add(R::kFfnDown, layer(l, "mlp.down_proj.weight"), {D, c.intermediate_size}, Q::kDense);
    } else {
      const int64_t E = c.num_experts, lat = c.routed_expert_hidden_size;
      add(R::kRouter, moe(l, "gate.weight"), {E, D});
      add(R::kRouterBias, moe(l, "gate.e_score_correction_bias"), {E});
      add(R::kLatDown, moe(l, "routed_expert_down_proj.weight"), {lat, D}, Q::kDense);
      add(R::kLatUp, moe(l, "routed_expert_up_proj.weight"), {D, lat}, Q::kDense);
      add(R::kLatNorm, moe(l, "routed_expert_norm.weight"), {lat});
      if (c.num_shared_experts > 0) {
        const int64_t S = c.shared_intermediate();
        add(R::kSharedGate, moe(l, "shared_experts.gate_proj.weight"), {S, D}, Q::kDense);
        add(R::kSharedUp, moe(l, "shared_experts.up_proj.weight"), {S, D}, Q::kDense);
        add(R::kSharedDown, moe(l, "shared_experts.down_proj.weight"), {D, S}, Q::kDense);
      }
    }
  }
  l = -1;
  add(R::kFinalNorm, "model.norm.weight", {D});
  add(R::kOutResNorm, "model.output_attn_res_norm.weight", {D});
  add(R::kOutResProj, "model.output_attn_res_proj.weight", {1, D});
  if (!c.tie_word_embeddings) add(R::kLmHead, "lm_head.weight", {V, D}, Q::kHead);
  return t;
}

std::vector<ExpectedTensor> all_tensors(const ModelConfig& c) {
  std::vector<ExpectedTensor> t = dense_tensors(c);
  for (int64_t l = c.first_k_dense_replace; l < c.num_hidden_layers; ++l)
    for (int64_t e = 0; e < c.num_experts; ++e)
      for (auto& x : expert_tensors(c, l, e)) t.push_back(std::move(x));
  return t;
}

}  // namespace k3::checkpoint
