#include "engined/model/weights.h"

#include <chrono>
#include <cmath>
#include <cstring>
#include <mutex>

#include "shared/base/log.h"
#include "shared/checkpoint/model_tensors.h"
#include "shared/kernels/convert.h"

namespace k3::engine {
namespace {

using namespace tensor_names;

// Streams a [rows, cols] tensor through f32 row blocks into a quantized matrix.
StatusOr<DenseMatrix> load_matrix(const Checkpoint& ck, const std::string& name, int bits) {
  K3_ASSIGN_OR_RETURN(const TensorInfo* t, ck.get(name));
  const int64_t rows = t->rows(), cols = t->cols();
  DenseMatrix m(bits, rows, cols);
  // ~4 MB of f32 per block.
  const int64_t block = std::max<int64_t>(1, (1 << 20) / std::max<int64_t>(cols, 1));
  const int64_t nblocks = (rows + block - 1) / block;
  Status first_error;
  std::mutex mu;
#pragma omp parallel if (nblocks > 1)
  {
    std::vector<float> buf(static_cast<size_t>(block * cols));
#pragma omp for schedule(dynamic)
    for (int64_t b = 0; b < nblocks; ++b) {
      const int64_t r0 = b * block, n = std::min(block, rows - r0);
      Status s = ck.read_rows_f32(*t, r0, n, buf.data());
      if (!s.ok()) {
        std::lock_guard<std::mutex> lock(mu);
        if (first_error.ok()) first_error = s;
        continue;
      }
      m.set_rows(r0, n, buf.data());
    }
  }
  if (!first_error.ok()) return first_error;
  return m;
}

StatusOr<std::vector<float>> load_vector(const Checkpoint& ck, const std::string& name) {
  return ck.read_f32(name);
}

// res_norm * res_proj, elementwise ([D] and [1, D] flattened).
StatusOr<std::vector<float>> load_res_weight(const Checkpoint& ck, const std::string& norm,
                                             const std::string& proj) {
  K3_ASSIGN_OR_RETURN(std::vector<float> a, ck.read_f32(norm));
  K3_ASSIGN_OR_RETURN(std::vector<float> b, ck.read_f32(proj));
  for (size_t i = 0; i < a.size(); ++i) a[i] *= b[i];
  return a;
}

Status load_kda(const Checkpoint& ck, const ModelConfig& c, int64_t l, int bits, KdaWeights* w) {
  K3_ASSIGN_OR_RETURN(w->q, load_matrix(ck, attn(l, "q_proj.weight"), bits));
  K3_ASSIGN_OR_RETURN(w->k, load_matrix(ck, attn(l, "k_proj.weight"), bits));
  K3_ASSIGN_OR_RETURN(w->v, load_matrix(ck, attn(l, "v_proj.weight"), bits));
  K3_ASSIGN_OR_RETURN(w->g, load_matrix(ck, attn(l, "g_proj.weight"), bits));
  K3_ASSIGN_OR_RETURN(w->o, load_matrix(ck, attn(l, "o_proj.weight"), bits));
  K3_ASSIGN_OR_RETURN(w->f_a, load_matrix(ck, attn(l, "f_a_proj.weight"), 32));
  K3_ASSIGN_OR_RETURN(w->f_b, load_matrix(ck, attn(l, "f_b_proj.weight"), 32));
  K3_ASSIGN_OR_RETURN(w->b, load_matrix(ck, attn(l, "b_proj.weight"), 32));
  K3_ASSIGN_OR_RETURN(w->q_conv, load_vector(ck, attn(l, "q_conv1d.weight")));
  K3_ASSIGN_OR_RETURN(w->k_conv, load_vector(ck, attn(l, "k_conv1d.weight")));
  K3_ASSIGN_OR_RETURN(w->v_conv, load_vector(ck, attn(l, "v_conv1d.weight")));
  K3_ASSIGN_OR_RETURN(w->dt_bias, load_vector(ck, attn(l, "dt_bias")));
  K3_ASSIGN_OR_RETURN(std::vector<float> a_log, load_vector(ck, attn(l, "A_log")));
  // Stored zero-padded beyond the head count: use the first H entries.
  w->a.resize(static_cast<size_t>(c.kda_num_heads));
  for (int64_t h = 0; h < c.kda_num_heads; ++h) w->a[h] = std::exp(a_log[h]);
  K3_ASSIGN_OR_RETURN(w->o_norm, load_vector(ck, attn(l, "o_norm.weight")));
  return absl::OkStatus();
}

Status load_mla(const Checkpoint& ck, int64_t l, int bits, MlaWeights* w) {
  K3_ASSIGN_OR_RETURN(w->q_a, load_matrix(ck, attn(l, "q_a_proj.weight"), bits));
  K3_ASSIGN_OR_RETURN(w->q_b, load_matrix(ck, attn(l, "q_b_proj.weight"), bits));
  K3_ASSIGN_OR_RETURN(w->kv_a, load_matrix(ck, attn(l, "kv_a_proj_with_mqa.weight"), bits));
  K3_ASSIGN_OR_RETURN(w->g, load_matrix(ck, attn(l, "g_proj.weight"), bits));
  K3_ASSIGN_OR_RETURN(w->o, load_matrix(ck, attn(l, "o_proj.weight"), bits));
  K3_ASSIGN_OR_RETURN(w->q_a_norm, load_vector(ck, attn(l, "q_a_layernorm.weight")));
  K3_ASSIGN_OR_RETURN(w->kv_a_norm, load_vector(ck, attn(l, "kv_a_layernorm.weight")));
  K3_ASSIGN_OR_RETURN(DenseMatrix kv_b, load_matrix(ck, attn(l, "kv_b_proj.weight"), bits));
  w->kv_b.resize(static_cast<size_t>(kv_b.rows() * kv_b.cols()));
  for (int64_t r = 0; r < kv_b.rows(); ++r) kv_b.row_f32(r, w->kv_b.data() + r * kv_b.cols());
  return absl::OkStatus();
}

Status load_moe(const Checkpoint& ck, const ModelConfig& c, int64_t l, int bits, MoeWeights* w) {
  K3_ASSIGN_OR_RETURN(w->router, load_matrix(ck, moe(l, "gate.weight"), 32));
  K3_ASSIGN_OR_RETURN(w->bias, load_vector(ck, moe(l, "gate.e_score_correction_bias")));
  K3_ASSIGN_OR_RETURN(w->lat_down, load_matrix(ck, moe(l, "routed_expert_down_proj.weight"), bits));
  K3_ASSIGN_OR_RETURN(w->lat_up, load_matrix(ck, moe(l, "routed_expert_up_proj.weight"), bits));
  K3_ASSIGN_OR_RETURN(w->lat_norm, load_vector(ck, moe(l, "routed_expert_norm.weight")));
  w->has_shared = c.num_shared_experts > 0;
  if (w->has_shared) {
    K3_ASSIGN_OR_RETURN(w->sh_gate,
                        load_matrix(ck, moe(l, "shared_experts.gate_proj.weight"), bits));
    K3_ASSIGN_OR_RETURN(w->sh_up, load_matrix(ck, moe(l, "shared_experts.up_proj.weight"), bits));
    K3_ASSIGN_OR_RETURN(w->sh_down,
                        load_matrix(ck, moe(l, "shared_experts.down_proj.weight"), bits));
  }
  return absl::OkStatus();
}

size_t matrix_bytes(const LayerWeights& lw) {
  size_t n = 0;
  for (const DenseMatrix* m :
       {&lw.kda_w.q,     &lw.kda_w.k,      &lw.kda_w.v,        &lw.kda_w.g,      &lw.kda_w.o,
        &lw.kda_w.f_a,   &lw.kda_w.f_b,    &lw.kda_w.b,        &lw.mla_w.q_a,    &lw.mla_w.q_b,
        &lw.mla_w.kv_a,  &lw.mla_w.g,      &lw.mla_w.o,        &lw.ffn.gate,     &lw.ffn.up,
        &lw.ffn.down,    &lw.moe_w.router, &lw.moe_w.lat_down, &lw.moe_w.lat_up, &lw.moe_w.sh_gate,
        &lw.moe_w.sh_up, &lw.moe_w.sh_down})
    n += m->bytes();
  return n + lw.mla_w.kv_b.size() * 4;
}

bool valid_bits(int b) {
  return b == 4 || b == 8 || b == 32;
}

}  // namespace

void ModelWeights::embed_row(int64_t id, float* out) const {
  const int64_t d = config.hidden_size;
  const uint8_t* row = embed.data() + static_cast<size_t>(id * d) * dtype_size(embed_dtype);
  if (embed_dtype == DType::kF32) {
    std::memcpy(out, row, static_cast<size_t>(d) * 4);
  } else if (embed_dtype == DType::kBF16) {
    kernels::bf16_to_f32(reinterpret_cast<const uint16_t*>(row), out, static_cast<size_t>(d));
  } else {
    kernels::f16_to_f32(reinterpret_cast<const uint16_t*>(row), out, static_cast<size_t>(d));
  }
}

StatusOr<std::unique_ptr<ModelWeights>> load_weights(const Checkpoint& ck, const ModelConfig& c,
                                                     const QuantConfig& q) {
  if (!valid_bits(q.dense_bits) || !valid_bits(q.mla_bits) || !valid_bits(q.head_bits))
    return absl::InvalidArgumentError("dense, MLA and lm_head bits must each be 32, 8 or 4");
  K3_RETURN_IF_ERROR(validate_checkpoint(ck, c, Required::kDense));
  auto log = logger("engined");
  const auto t0 = std::chrono::steady_clock::now();
  auto w = std::make_unique<ModelWeights>();
  w->config = c;
  w->quant = q;
  {
    K3_ASSIGN_OR_RETURN(const TensorInfo* t, ck.get("model.embed_tokens.weight"));
    w->embed_dtype = t->dtype;
    w->embed.resize(t->nbytes);
    K3_RETURN_IF_ERROR(ck.read_bytes(*t, 0, t->nbytes, w->embed.data()));
  }
  w->layers.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    LayerWeights& lw = w->layers[l];
    lw.kda = c.is_kda(l);
    lw.moe = c.is_moe(l);
    K3_ASSIGN_OR_RETURN(lw.in_norm, load_vector(ck, layer(l, "input_layernorm.weight")));
    K3_ASSIGN_OR_RETURN(lw.post_norm, load_vector(ck, layer(l, "post_attention_layernorm.weight")));
    K3_ASSIGN_OR_RETURN(lw.asw, load_res_weight(ck, layer(l, "self_attention_res_norm.weight"),
                                                layer(l, "self_attention_res_proj.weight")));
    K3_ASSIGN_OR_RETURN(lw.msw, load_res_weight(ck, layer(l, "mlp_res_norm.weight"),
                                                layer(l, "mlp_res_proj.weight")));
    if (lw.kda)
      K3_RETURN_IF_ERROR(load_kda(ck, c, l, q.dense_bits, &lw.kda_w));
    else
      K3_RETURN_IF_ERROR(load_mla(ck, l, q.mla_bits, &lw.mla_w));
    if (lw.moe) {
      K3_RETURN_IF_ERROR(load_moe(ck, c, l, q.dense_bits, &lw.moe_w));
    } else {
      K3_ASSIGN_OR_RETURN(lw.ffn.gate,
                          load_matrix(ck, layer(l, "mlp.gate_proj.weight"), q.dense_bits));
      K3_ASSIGN_OR_RETURN(lw.ffn.up, load_matrix(ck, layer(l, "mlp.up_proj.weight"), q.dense_bits));
      K3_ASSIGN_OR_RETURN(lw.ffn.down,
                          load_matrix(ck, layer(l, "mlp.down_proj.weight"), q.dense_bits));
    }
    w->resident_bytes += matrix_bytes(lw);
    const double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    const double eta =
        el / static_cast<double>(l + 1) * static_cast<double>(c.num_hidden_layers - l - 1);
    log->info("loaded layer {}/{} ({:.1f} s, ETA {:.1f} s)", l + 1, c.num_hidden_layers, el, eta);
  }
  K3_ASSIGN_OR_RETURN(w->final_norm, load_vector(ck, "model.norm.weight"));
  K3_ASSIGN_OR_RETURN(w->out_sw, load_res_weight(ck, "model.output_attn_res_norm.weight",
                                                 "model.output_attn_res_proj.weight"));
  K3_ASSIGN_OR_RETURN(
      w->lm_head,
      load_matrix(ck, c.tie_word_embeddings ? "model.embed_tokens.weight" : "lm_head.weight",
                  q.head_bits));
  w->resident_bytes += w->embed.size() + w->lm_head.bytes();
  return w;
}

}  // namespace k3::engine
