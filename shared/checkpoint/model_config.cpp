#include "shared/checkpoint/model_config.h"
#include "shared/base/json_file.h"

#include <cmath>
#include <nlohmann/json.hpp>
#include <set>

#include "shared/base/file.h"

namespace k3::checkpoint {
namespace {

using json = nlohmann::json;

// Upper bound for any width: far above the real model (7168 hidden, 163840
// vocab) and low enough that products of two stay clear of int64 overflow.
constexpr int64_t kMaxDim = 1 << 22;

class Reader {
 public:
  Reader(const json& obj, std::string_view label, std::string prefix)
      : obj_(obj), label_(label), prefix_(std::move(prefix)) {}

  Status error(std::string_view key, std::string_view what) const {
    return absl::InvalidArgumentError(cat(label_, ": ", prefix_, key, ": ", what));
  }

  bool has(std::string_view key) const {
    auto it = obj_.find(key);
    return it != obj_.end() && !it->is_null();
  }

  Status integer(std::string_view key, int64_t lo, int64_t hi, int64_t* out,
                 bool required = true) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) {
      if (required) return error(key, "missing");
      return absl::OkStatus();
    }
    int64_t v;
    if (it->is_number_integer()) {
      if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(INT64_MAX))
        return error(key, "out of range");
      v = it->get<int64_t>();
    } else if (it->is_number_float()) {
      double d = it->get<double>();
      if (!std::isfinite(d) || d != std::floor(d) || std::fabs(d) > 9e15)
        return error(key, "must be an integer");
      v = static_cast<int64_t>(d);
    } else {
      return error(key, "must be an integer");
    }
    if (v < lo || v > hi) return error(key, cat(v, " is outside [", lo, ", ", hi, "]"));
    *out = v;
    return absl::OkStatus();
  }

  Status number(std::string_view key, double lo, double hi, double* out,
                bool required = true) const {
    auto it = obj_.find(key);
    if (it == obj_.end() || it->is_null()) {
      if (required) return error(key, "missing");
      return absl::OkStatus();
    }
    if (!it->is_number()) return error(key, "must be a number");
    double v = it->get<double>();
    if (!std::isfinite(v) || v < lo || v > hi)
      return error(key, cat(v, " is outside [", lo, ", ", hi, "]"));
    *out = v;
    return absl::OkStatus();
  }

  const json* find(std::string_view key) const {
    auto it = obj_.find(key);
    return (it == obj_.end() || it->is_null()) ? nullptr : &*it;
  }

 private:
  const json& obj_;
  std::string_view label_;
  std::string prefix_;
};

Status read_layer_list(const Reader& r, std::string_view key, int64_t layers,
                       std::set<int64_t>* out) {
  const json* v = r.find(key);
  if (v == nullptr) return r.error(key, "missing");
  if (!v->is_array()) return r.error(key, "must be a list of 1-indexed layer numbers");
  for (const json& e : *v) {
    if (!e.is_number_integer()) return r.error(key, "entries must be integers");
    int64_t n = e.get<int64_t>();
    if (n < 1 || n > layers) return r.error(key, cat("layer ", n, " is outside [1, ", layers, "]"));
    if (!out->insert(n).second) return r.error(key, cat("layer ", n, " is listed twice"));
  }
  return absl::OkStatus();
}

// The routed experts' storage: compressed-tensors MXFP4, 4-bit floats with
// one ue8m0 scale per 32 columns (K3_MODEL.md, "MXFP4").
Status check_quantization(const Reader& r, const json& q) {
  constexpr std::string_view key = "quantization_config";
  if (!q.is_object()) return r.error(key, "must be an object");
  auto str = [&](const json& o, const char* k) -> std::string {
    auto it = o.find(k);
    return it != o.end() && it->is_string() ? it->get<std::string>() : std::string();
  };
  if (q.contains("quant_method") && str(q, "quant_method") != "compressed-tensors")
    return r.error(cat(key, ".quant_method"),
                   cat(q["quant_method"].dump(), " is not supported (compressed-tensors)"));
  if (q.contains("format") && str(q, "format") != "mxfp4-pack-quantized")
    return r.error(cat(key, ".format"),
                   cat(q["format"].dump(), " is not supported (mxfp4-pack-quantized)"));
  auto groups = q.find("config_groups");
  if (groups == q.end() || groups->is_null()) return absl::OkStatus();
  if (!groups->is_object()) return r.error(cat(key, ".config_groups"), "must be an object");
  for (auto g = groups->begin(); g != groups->end(); ++g) {
    const std::string at = cat(key, ".config_groups.", g.key());
    if (!g->is_object()) return r.error(at, "must be an object");
    if (g->contains("format") && str(*g, "format") != "mxfp4-pack-quantized")
      return r.error(cat(at, ".format"),
                     cat((*g)["format"].dump(), " is not supported (mxfp4-pack-quantized)"));
    auto w = g->find("weights");
    if (w == g->end() || w->is_null()) continue;
    if (!w->is_object()) return r.error(cat(at, ".weights"), "must be an object");
    const std::pair<const char*, int64_t> want[] = {{"num_bits", 4}, {"group_size", 32}};
    for (const auto& [k, v] : want) {
      auto it = w->find(k);
      if (it == w->end() || it->is_null()) continue;
      if (!it->is_number_integer() || it->get<int64_t>() != v)
        return r.error(cat(at, ".weights.", k), cat(it->dump(), " is not supported (", v, ")"));
    }
    if (w->contains("type") && str(*w, "type") != "float")
      return r.error(cat(at, ".weights.type"),
                     cat((*w)["type"].dump(), " is not supported (float: MXFP4's e2m1)"));
  }
  return absl::OkStatus();
}

}  // namespace

uint64_t ModelConfig::expert_bytes() const {
  const uint64_t ie = static_cast<uint64_t>(moe_intermediate_size);
  const uint64_t lat = static_cast<uint64_t>(routed_expert_hidden_size);
  // w1, w3: [ie, lat]; w2: [lat, ie]; each packed (1/2 byte) + scale (1/32 byte).
  const uint64_t per_matrix = ie * lat / 2 + ie * lat / 32;
  return 3 * per_matrix;
}

std::string ModelConfig::summary() const {
  int64_t kda = 0;
  for (bool b : layer_is_kda) kda += b;
  return cat("layers=", num_hidden_layers, " (kda=", kda, " mla=", num_hidden_layers - kda,
             ", dense ffn=", first_k_dense_replace, ") hidden=", hidden_size, " vocab=", vocab_size,
             " experts=", num_experts, " top", num_experts_per_token,
             " latent=", routed_expert_hidden_size, " expert_inter=", moe_intermediate_size,
             " expert_bytes=", expert_bytes());
}

StatusOr<ModelConfig> parse_model_config(std::string_view text, std::string_view label) {
  K3_ASSIGN_OR_RETURN(json root, base::parse_json_file(text, label));
  if (!root.is_object()) return absl::InvalidArgumentError(cat(label, ": not a JSON object"));
  const json* tc = &root;
  std::string prefix;
  auto it = root.find("text_config");
  if (it != root.end() && !it->is_null()) {
    if (!it->is_object())
      return absl::InvalidArgumentError(cat(label, ": text_config is not an object"));
    tc = &*it;
    prefix = "text_config.";
  }
  Reader r(*tc, label, prefix);
  ModelConfig c;
  K3_RETURN_IF_ERROR(r.integer("hidden_size", 1, kMaxDim, &c.hidden_size));
  K3_RETURN_IF_ERROR(r.integer("num_hidden_layers", 1, 4096, &c.num_hidden_layers));
  K3_RETURN_IF_ERROR(r.integer("vocab_size", 1, kMaxDim, &c.vocab_size));
  K3_RETURN_IF_ERROR(
      r.integer("first_k_dense_replace", 0, c.num_hidden_layers, &c.first_k_dense_replace));
  K3_RETURN_IF_ERROR(r.integer("intermediate_size", 1, kMaxDim, &c.intermediate_size,
                               c.first_k_dense_replace > 0));
  K3_RETURN_IF_ERROR(r.integer("num_attention_heads", 1, 4096, &c.num_attention_heads));
  K3_RETURN_IF_ERROR(r.integer("q_lora_rank", 1, kMaxDim, &c.q_lora_rank));
  K3_RETURN_IF_ERROR(r.integer("kv_lora_rank", 1, kMaxDim, &c.kv_lora_rank));
  K3_RETURN_IF_ERROR(r.integer("qk_nope_head_dim", 0, 4096, &c.qk_nope_head_dim));
  K3_RETURN_IF_ERROR(r.integer("qk_rope_head_dim", 0, 4096, &c.qk_rope_head_dim));
  K3_RETURN_IF_ERROR(r.integer("v_head_dim", 1, 4096, &c.v_head_dim));
  if (c.qk_nope_head_dim + c.qk_rope_head_dim < 1)
    return r.error("qk_nope_head_dim", "qk_nope_head_dim + qk_rope_head_dim must be positive");
  const bool has_moe = c.first_k_dense_replace < c.num_hidden_layers;
  K3_RETURN_IF_ERROR(r.integer("num_experts", 1, 1 << 16, &c.num_experts, has_moe));
  K3_RETURN_IF_ERROR(
      r.integer("num_experts_per_token", 1, 1 << 16, &c.num_experts_per_token, has_moe));
  if (has_moe && c.num_experts_per_token > c.num_experts)
    return r.error("num_experts_per_token",
                   cat(c.num_experts_per_token, " exceeds num_experts ", c.num_experts));
  K3_RETURN_IF_ERROR(
      r.integer("moe_intermediate_size", 1, kMaxDim, &c.moe_intermediate_size, has_moe));
  K3_RETURN_IF_ERROR(
      r.integer("routed_expert_hidden_size", 1, kMaxDim, &c.routed_expert_hidden_size, has_moe));
  if (has_moe) {
    // MXFP4 packs two columns per byte and one scale per 32 columns, along
    // both the latent (w1, w3) and the intermediate (w2) axis.
    if (c.moe_intermediate_size % 32 != 0)
      return r.error("moe_intermediate_size", "must be a multiple of 32 (MXFP4 groups)");
    if (c.routed_expert_hidden_size % 32 != 0)
      return r.error("routed_expert_hidden_size", "must be a multiple of 32 (MXFP4 groups)");
  }
  K3_RETURN_IF_ERROR(r.integer("num_shared_experts", 0, 64, &c.num_shared_experts, false));
  K3_RETURN_IF_ERROR(r.number("routed_scaling_factor", 1e-6, 1e6, &c.routed_scaling_factor, false));
  int64_t groups = 1;
  K3_RETURN_IF_ERROR(r.integer("n_group", 1, 1 << 16, &groups, false));
  if (groups != 1) return r.error("n_group", "group-limited routing is not part of K3 (must be 1)");
  K3_RETURN_IF_ERROR(r.integer("num_expert_group", 1, 1 << 16, &groups, false));
  if (groups != 1)
    return r.error("num_expert_group", "group-limited routing is not part of K3 (must be 1)");
  K3_RETURN_IF_ERROR(r.integer("attn_res_block_size", 1, 4096, &c.attn_res_block_size));
  K3_RETURN_IF_ERROR(r.number("activation_situ_beta", 1e-3, 1e6, &c.activation_situ_beta));
  K3_RETURN_IF_ERROR(
      r.number("activation_situ_linear_beta", 1e-3, 1e6, &c.activation_situ_linear_beta));
  K3_RETURN_IF_ERROR(r.number("rms_norm_eps", 1e-12, 1e-1, &c.rms_norm_eps));

  const json* la = r.find("linear_attn_config");
  if (la == nullptr || !la->is_object())
    return r.error("linear_attn_config", "missing or not an object");
  Reader lr(*la, label, cat(prefix, "linear_attn_config."));
  K3_RETURN_IF_ERROR(lr.integer("num_heads", 1, 4096, &c.kda_num_heads));
  K3_RETURN_IF_ERROR(lr.integer("head_dim", 1, 4096, &c.kda_head_dim));
  K3_RETURN_IF_ERROR(lr.integer("short_conv_kernel_size", 1, 16, &c.short_conv_kernel_size));
  K3_RETURN_IF_ERROR(lr.number("gate_lower_bound", -100.0, -1e-6, &c.gate_lower_bound, false));
  std::set<int64_t> kda;
  K3_RETURN_IF_ERROR(read_layer_list(lr, "kda_layers", c.num_hidden_layers, &kda));
  if (lr.has("full_attn_layers")) {
    std::set<int64_t> full;
    K3_RETURN_IF_ERROR(read_layer_list(lr, "full_attn_layers", c.num_hidden_layers, &full));
    for (int64_t l = 1; l <= c.num_hidden_layers; ++l) {
      if (kda.count(l) == full.count(l))
        return lr.error("full_attn_layers", cat("must be the complement of kda_layers (layer ", l,
                                                kda.count(l) ? " is in both)" : " is in neither)"));
    }
  }
  c.layer_is_kda.resize(static_cast<size_t>(c.num_hidden_layers));
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) c.layer_is_kda[l] = kda.count(l + 1) > 0;

  // The special ids: text_config's, else the root's.
  Reader root_reader(root, label, "");
  const Reader& ids = [&]() -> const Reader& {
    for (const char* k : {"bos_token_id", "eos_token_id", "pad_token_id"})
      if (r.has(k)) return r;
    return root_reader;
  }();
  K3_RETURN_IF_ERROR(ids.integer("bos_token_id", 0, c.vocab_size - 1, &c.bos_token_id, false));
  K3_RETURN_IF_ERROR(ids.integer("pad_token_id", 0, c.vocab_size - 1, &c.pad_token_id, false));
  if (r.has("quantization_config"))
    K3_RETURN_IF_ERROR(check_quantization(r, *r.find("quantization_config")));
  else if (tc != &root && root_reader.has("quantization_config"))
    K3_RETURN_IF_ERROR(check_quantization(root_reader, *root_reader.find("quantization_config")));
  for (const json* src : std::initializer_list<const json*>{tc, &root}) {
    auto t = src->find("tie_word_embeddings");
    if (t != src->end() && !t->is_null()) {
      if (!t->is_boolean()) return r.error("tie_word_embeddings", "must be true or false");
      c.tie_word_embeddings = t->get<bool>();
      break;
    }
  }
  return c;
}

StatusOr<ModelConfig> load_model_config(const std::string& model_dir) {
  const std::string path = model_dir + "/config.json";
  K3_ASSIGN_OR_RETURN(std::string text, base::read_small_file(path, 16u << 20));
  return parse_model_config(text, path);
}

}  // namespace k3::checkpoint
