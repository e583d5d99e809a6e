#include "tools/mkmodel/mkmodel.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <numeric>

#include "shared/base/log.h"
#include "shared/base/progress.h"
#include "shared/checkpoint/model_config.h"
#include "shared/checkpoint/model_tensors.h"
#include "shared/checkpoint/safetensors_writer.h"
#include "shared/kernels/convert.h"
#include "tools/mkmodel/counter_rng.h"
#include "tools/mkmodel/synthetic_tokenizer.h"

namespace k3::tools {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::ordered_json;

constexpr std::string_view kPrefix = "language_model.";

// The knobs of a synthetic model. Keys match config.json where one exists.
using Dims = std::map<std::string, int64_t>;

Dims preset_dims(const std::string& preset) {
  if (preset == "k3-slice") {
    // The real model's per-layer shapes (K3_MODEL.md) with few layers and
    // experts: for I/O and kernel benchmarks.
    return {{"hidden_size", 7168},
            {"num_hidden_layers", 4},
            {"first_k_dense_replace", 1},
            {"intermediate_size", 18432},
            {"num_attention_heads", 96},
            {"q_lora_rank", 1536},
            {"kv_lora_rank", 512},
            {"qk_nope_head_dim", 128},
            {"qk_rope_head_dim", 64},
            {"v_head_dim", 128},
            {"num_experts", 32},
            {"num_experts_per_token", 16},
            {"moe_intermediate_size", 3072},
            {"routed_expert_hidden_size", 3584},
            {"num_shared_experts", 2},
            {"attn_res_block_size", 12},
            {"kda_num_heads", 96},
            {"kda_head_dim", 128},
            {"short_conv_kernel_size", 4},
            {"mla_every", 4}};
  }
  // tiny: seconds to build, every feature of the architecture present.
  return {{"hidden_size", 512},
          {"num_hidden_layers", 6},
          {"first_k_dense_replace", 1},
          {"intermediate_size", 1024},
          {"num_attention_heads", 4},
          {"q_lora_rank", 128},
          {"kv_lora_rank", 64},
          {"qk_nope_head_dim", 32},
          {"qk_rope_head_dim", 16},
          {"v_head_dim", 32},
          {"num_experts", 32},
          {"num_experts_per_token", 4},
          {"moe_intermediate_size", 128},
          {"routed_expert_hidden_size", 256},
          {"num_shared_experts", 2},
          {"attn_res_block_size", 2},
          {"kda_num_heads", 4},
          {"kda_head_dim", 64},
          {"short_conv_kernel_size", 4},
          {"mla_every", 4}};
}

// A_log is stored longer than the head count and zero-padded (96 -> 128).
int64_t padded_heads(int64_t h) {
  int64_t p = 1;
  while (p < h) p <<= 1;
  return p == h ? 2 * p : p;
}

// The vision tower's width and patch size (a few small tensors: never read,
// stored as the published snapshot stores its tower).
constexpr int64_t kVisionHidden = 32;
constexpr int64_t kPatch = 14;

// The published quantization_config: only the routed experts are MXFP4.
json quantization_config() {
  return {{"config_groups",
           {{"group_0",
             {{"format", "mxfp4-pack-quantized"},
              {"input_activations", nullptr},
              {"output_activations", nullptr},
              {"targets", {"Linear"}},
              {"weights",
               {{"dynamic", false},
                {"group_size", 32},
                {"num_bits", 4},
                {"observer", "minmax"},
                {"scale_dtype", "torch.uint8"},
                {"strategy", "group"},
                {"symmetric", true},
                {"type", "float"}}}}}}},
          {"format", "mxfp4-pack-quantized"},
          {"ignore",
           {"re:.*self_attn.*", "re:.*shared_experts.*", "re:.*mlp\\.(gate|up|gate_up|down)_proj.*",
            "re:.*lm_head.*", "re:.*vision_tower.*", "re:.*mm_projector.*"}},
          {"quant_method", "compressed-tensors"},
          {"quantization_status", "compressed"}};
}

json make_config(const Dims& d, const SyntheticTokenizer& tok) {
  const int64_t layers = d.at("num_hidden_layers"), every = d.at("mla_every");
  json kda = json::array(), full = json::array();
  for (int64_t n = 1; n <= layers; ++n) {
    // MLA at every `every`-th layer (1-indexed) and at the final layer.
    if (n % every == 0 || n == layers)
      full.push_back(n);
    else
      kda.push_back(n);
  }
  json tc = {{"model_type", "kimi_linear"},
             {"hidden_size", d.at("hidden_size")},
             {"num_hidden_layers", layers},
             {"vocab_size", tok.vocab_size},
             {"first_k_dense_replace", d.at("first_k_dense_replace")},
             {"intermediate_size", d.at("intermediate_size")},
             {"num_attention_heads", d.at("num_attention_heads")},
             {"q_lora_rank", d.at("q_lora_rank")},
             {"kv_lora_rank", d.at("kv_lora_rank")},
             {"qk_nope_head_dim", d.at("qk_nope_head_dim")},
             {"qk_rope_head_dim", d.at("qk_rope_head_dim")},
             {"v_head_dim", d.at("v_head_dim")},
             {"num_experts", d.at("num_experts")},
             {"num_experts_per_token", d.at("num_experts_per_token")},
             {"moe_intermediate_size", d.at("moe_intermediate_size")},
             {"routed_expert_hidden_size", d.at("routed_expert_hidden_size")},
             {"num_shared_experts", d.at("num_shared_experts")},
             {"routed_scaling_factor", 1.0},
             {"attn_res_block_size", d.at("attn_res_block_size")},
             {"activation_situ_beta", 4.0},
             {"activation_situ_linear_beta", 25.0},
             {"rms_norm_eps", 1e-5},
             {"linear_attn_config",
              {{"num_heads", d.at("kda_num_heads")},
               {"head_dim", d.at("kda_head_dim")},
               {"short_conv_kernel_size", d.at("short_conv_kernel_size")},
               {"gate_lower_bound", -5.0},
               {"kda_layers", kda},
               {"full_attn_layers", full}}},
             {"bos_token_id", tok.bos_id},
             {"eos_token_id", tok.end_of_msg_id},
             {"pad_token_id", tok.pad_id},
             {"tie_word_embeddings", false},
             {"quantization_config", quantization_config()}};
  // The published layout: the text model under text_config (with its
  // quantization), the special ids at the root as well, the vision tower
  // beside it.
  return {{"architectures", {"KimiK3ForConditionalGeneration"}},
          {"bos_token_id", tok.bos_id},
          {"eos_token_id", tok.end_of_msg_id},
          {"media_placeholder_token_id", tok.media_pad_id},
          {"model_type", "kimi_k3"},
          {"pad_token_id", tok.pad_id},
          {"tie_word_embeddings", false},
          {"text_config", tc},
          {"vision_config",
           {{"model_type", "kimi_k3_vision"},
            {"patch_size", kPatch},
            {"vt_hidden_size", kVisionHidden},
            {"vt_num_hidden_layers", 1},
            {"mm_hidden_size", kVisionHidden},
            {"merge_kernel_size", {2, 2}},
            {"text_hidden_size", d.at("hidden_size")}}}};
}

// How the values of one tensor are drawn.
enum class Fill { kNormal, kNormWeight, kALog, kConv, kPacked, kScale };

struct TensorSpec {
  std::string name;  // without prefix
  checkpoint::DType dtype = checkpoint::DType::kBF16;
  std::vector<int64_t> shape;
  Fill fill = Fill::kNormal;
  float scale = 1.0f;    // std of kNormal / kConv
  int64_t heads = 0;     // kALog: live entries
  int scale_base = 127;  // kScale: the usual exponent
  uint64_t nbytes() const {
    uint64_t n = checkpoint::dtype_size(dtype);
    for (int64_t x : shape) n *= static_cast<uint64_t>(x);
    return n;
  }
  uint64_t numel() const { return nbytes() / checkpoint::dtype_size(dtype); }
};

bool ends_with(const std::string& s, std::string_view suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

TensorSpec spec_for(const checkpoint::ExpectedTensor& e, const checkpoint::ModelConfig& c,
                    checkpoint::DType dense) {
  TensorSpec s;
  s.name = e.name;
  s.shape = e.shape;
  s.dtype = dense;
  switch (e.cls) {
    case checkpoint::TensorClass::kExpertPacked:
      s.dtype = checkpoint::DType::kU8;
      s.fill = Fill::kPacked;
      return s;
    case checkpoint::TensorClass::kExpertScale: {
      s.dtype = checkpoint::DType::kU8;
      s.fill = Fill::kScale;
      // Uniform e2m1 codes have rms ~2.93; aim the weights at rms 1/sqrt(fan_in).
      const double fan_in = static_cast<double>(e.shape[1]) * 32.0;
      s.scale_base =
          127 + static_cast<int>(std::floor(std::log2(1.0 / (2.93 * std::sqrt(fan_in)))));
      return s;
    }
    case checkpoint::TensorClass::kALog:
      s.dtype = checkpoint::DType::kF32;
      s.fill = Fill::kALog;
      s.heads = e.shape[0];
      s.shape = {padded_heads(e.shape[0])};
      return s;
    case checkpoint::TensorClass::kDense:
      break;
  }
  const int64_t D = c.hidden_size;
  if (e.name == "model.embed_tokens.weight") {
    s.scale = 1.0f;
  } else if (ends_with(e.name, "dt_bias")) {
    s.dtype = checkpoint::DType::kF32;
    s.scale = 0.5f;
  } else if (ends_with(e.name, "e_score_correction_bias")) {
    s.dtype = checkpoint::DType::kF32;
    s.scale = 0.02f;
  } else if (ends_with(e.name, "conv1d.weight")) {
    s.fill = Fill::kConv;
    s.scale = 1.0f / std::sqrt(static_cast<float>(e.shape[2]));
  } else if (ends_with(e.name, "res_proj.weight")) {
    // Mix scores of spread ~0.5: the AttnRes softmax is neither uniform nor one-hot.
    s.scale = 0.5f / std::sqrt(static_cast<float>(D));
  } else if (e.shape.size() == 1) {
    s.fill = Fill::kNormWeight;
  } else {
    s.scale = 1.0f / std::sqrt(static_cast<float>(e.shape.back()));
  }
  return s;
}

// Fills elements [i0, i0+n) of tensor `s` into `out` (bytes of its dtype).
void fill_range(const TensorSpec& s, uint64_t key, uint64_t i0, size_t n, char* out) {
  if (s.fill == Fill::kPacked) {
    for (size_t j = 0; j < n; ++j) {
      const uint64_t i = i0 + j;
      out[j] = static_cast<char>(random_u64(key, i >> 3) >> (8 * (i & 7)));
    }
    return;
  }
  if (s.fill == Fill::kScale) {
    for (size_t j = 0; j < n; ++j)
      out[j] = static_cast<char>(s.scale_base - static_cast<int>(random_u64(key, i0 + j) & 1));
    return;
  }
  const int64_t last = s.shape.empty() ? 1 : s.shape.back();
  for (size_t j = 0; j < n; ++j) {
    const uint64_t i = i0 + j;
    float v;
    switch (s.fill) {
      case Fill::kNormWeight:
        v = 1.0f + 0.1f * random_normal(key, i);
        break;
      case Fill::kALog:
        // exp(A_log) in [1, 16] for live heads; exact zeros in the padding.
        v = static_cast<int64_t>(i) < s.heads
                ? static_cast<float>(std::log(1.0 + 15.0 * random_uniform(key, i)))
                : 0.0f;
        break;
      case Fill::kConv:
        // The current-token tap (K-1) carries most of the weight.
        v = s.scale * random_normal(key, i) +
            (static_cast<int64_t>(i % last) == last - 1 ? 0.5f : 0.0f);
        break;
      default:
        v = s.scale * random_normal(key, i);
    }
    switch (s.dtype) {
      case checkpoint::DType::kF32:
        std::memcpy(out + 4 * j, &v, 4);
        break;
      case checkpoint::DType::kF16: {
        uint16_t h = kernels::f32_to_f16(v);
        std::memcpy(out + 2 * j, &h, 2);
        break;
      }
      default: {
        uint16_t h = kernels::f32_to_bf16(v);
        std::memcpy(out + 2 * j, &h, 2);
      }
    }
  }
}

// Storage order: embedding; per layer its dense tensors then its routed
// experts in a seeded shuffle (not id order, as the real shards); the final
// norms and lm_head. An expert's six tensors form one unit (never split).
struct Unit {
  std::vector<TensorSpec> tensors;
  uint64_t bytes() const {
    uint64_t n = 0;
    for (const auto& t : tensors) n += t.nbytes();
    return n;
  }
};

int64_t layer_of(const std::string& name) {
  static const std::string p = "model.layers.";
  if (name.rfind(p, 0) != 0) return -1;
  return std::stoll(name.substr(p.size()));
}

std::vector<Unit> storage_units(const checkpoint::ModelConfig& c, checkpoint::DType dense,
                                uint64_t seed) {
  std::vector<Unit> head, tail;
  std::vector<std::vector<Unit>> per_layer(static_cast<size_t>(c.num_hidden_layers));
  for (const checkpoint::ExpectedTensor& e : checkpoint::dense_tensors(c)) {
    Unit u;
    u.tensors.push_back(spec_for(e, c, dense));
    const int64_t l = layer_of(e.name);
    if (l >= 0)
      per_layer[l].push_back(std::move(u));
    else if (e.name == "model.embed_tokens.weight")
      head.push_back(std::move(u));
    else
      tail.push_back(std::move(u));
  }
  std::vector<Unit> out = std::move(head);
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    for (auto& u : per_layer[l]) out.push_back(std::move(u));
    if (!c.is_moe(l)) continue;
    std::vector<int64_t> order(static_cast<size_t>(c.num_experts));
    std::iota(order.begin(), order.end(), 0);
    // Seeded Fisher-Yates.
    const uint64_t key = stream_key(seed, cat("expert-order-", l));
    for (size_t i = order.size(); i > 1; --i)
      std::swap(order[i - 1], order[random_u64(key, i) % i]);
    for (int64_t e : order) {
      Unit u;
      for (const checkpoint::ExpectedTensor& t : checkpoint::expert_tensors(c, l, e))
        u.tensors.push_back(spec_for(t, c, dense));
      out.push_back(std::move(u));
    }
  }
  for (auto& u : tail) out.push_back(std::move(u));
  return out;
}

// The vision tower, a few small tensors named as the published ones: the
// projector's shard, then the tower's.
std::vector<std::vector<TensorSpec>> vision_shards(int64_t hidden, checkpoint::DType dense) {
  const int64_t v = kVisionHidden, merged = 4 * v;  // 2x2 patches merged
  auto spec = [&](std::string name, std::vector<int64_t> shape) {
    TensorSpec t;
    t.name = std::move(name);
    t.dtype = dense;
    t.shape = std::move(shape);
    if (t.shape.size() == 1)
      t.fill = Fill::kNormWeight;
    else
      t.scale = 1.0f / std::sqrt(static_cast<float>(t.shape.back()));
    return t;
  };
  const std::string block = "vision_tower.encoder.blocks.0.";
  return {{spec("mm_projector.proj.0.weight", {merged, merged}),
           spec("mm_projector.proj.2.weight", {hidden, merged}),
           spec("mm_projector.post_norm.weight", {hidden})},
          {spec("vision_tower.patch_embed.proj.weight", {v, 3, kPatch, kPatch}),
           spec(block + "norm0.weight", {v}), spec(block + "wqkv.weight", {3 * v, v}),
           spec(block + "wo.weight", {v, v}),
           spec("vision_tower.encoder.final_layernorm.weight", {v})}};
}

Status check_out_dir(const MkModelOptions& opt) {
  std::error_code ec;
  if (fs::exists(opt.out_dir, ec)) {
    if (!fs::is_directory(opt.out_dir, ec))
      return absl::InvalidArgumentError(cat(opt.out_dir, " exists and is not a directory"));
    if (!opt.force && !fs::is_empty(opt.out_dir, ec))
      return absl::AlreadyExistsError(
          cat(opt.out_dir, " is not empty (use --force to overwrite the model files in it)"));
  } else if (!fs::create_directories(opt.out_dir, ec)) {
    return absl::PermissionDeniedError(cat("cannot create ", opt.out_dir, ": ", ec.message()));
  }
  return absl::OkStatus();
}

}  // namespace

const std::map<std::string, std::string>& override_help() {
  static const std::map<std::string, std::string> help = {
      {"hidden_size", "model width, in dimensions"},
      {"num_hidden_layers", "layer count"},
      {"first_k_dense_replace", "leading layers with a dense FFN"},
      {"intermediate_size", "dense FFN width, in dimensions"},
      {"num_attention_heads", "MLA heads"},
      {"q_lora_rank", "MLA query latent rank, in dimensions"},
      {"kv_lora_rank", "MLA key/value latent rank, in dimensions"},
      {"qk_nope_head_dim", "MLA nope head dim"},
      {"qk_rope_head_dim", "MLA rope head dim"},
      {"v_head_dim", "MLA value head dim"},
      {"num_experts", "routed experts per MoE layer"},
      {"num_experts_per_token", "top-k"},
      {"moe_intermediate_size", "expert intermediate width (multiple of 32)"},
      {"routed_expert_hidden_size", "expert latent width (multiple of 32)"},
      {"num_shared_experts", "fused shared experts"},
      {"attn_res_block_size", "AttnRes block size"},
      {"kda_num_heads", "KDA heads"},
      {"kda_head_dim", "KDA head dim"},
      {"short_conv_kernel_size", "KDA conv taps"},
      {"mla_every", "an MLA layer every N layers (and the last)"},
  };
  return help;
}

// The overrides in `given` that change nothing in a model of `dims` (the
// preset with the overrides applied, before top-k is clamped).
static std::vector<NoEffect> overrides_without_effect(const Dims& dims,
                                                      const std::map<std::string, int64_t>& given) {
  std::vector<NoEffect> out;
  const int64_t layers = dims.at("num_hidden_layers");
  const bool moe = dims.at("first_k_dense_replace") < layers;
  const bool dense = dims.at("first_k_dense_replace") > 0;
  // MLA at every mla_every-th layer and the last: KDA only when some layer is not.
  const bool kda = dims.at("mla_every") > 1 && layers > 1;
  for (const auto& [key, value] : given) {
    if (!moe &&
        (key == "num_experts" || key == "num_experts_per_token" || key == "moe_intermediate_size" ||
         key == "routed_expert_hidden_size" || key == "num_shared_experts")) {
      out.push_back({key, cat("the model has no MoE layer (first_k_dense_replace ",
                              dims.at("first_k_dense_replace"), " of ", layers, " layers)")});
    } else if (!dense && key == "intermediate_size") {
      out.push_back({key, "no layer has a dense FFN (first_k_dense_replace 0)"});
    } else if (!kda && (key == "kda_num_heads" || key == "kda_head_dim" ||
                        key == "short_conv_kernel_size")) {
      out.push_back({key, cat("every layer is MLA (mla_every ", dims.at("mla_every"), ", ", layers,
                              " layers): no KDA layer")});
    } else if (key == "num_experts_per_token" && value > dims.at("num_experts")) {
      out.push_back({key, cat("more than the ", dims.at("num_experts"),
                              " routed experts: clamped to ", dims.at("num_experts"))});
    }
  }
  return out;
}

StatusOr<MkModelResult> make_model(const MkModelOptions& opt) {
  const auto t0 = std::chrono::steady_clock::now();
  auto log = base::logger("mkmodel");
  if (opt.preset != "tiny" && opt.preset != "k3-slice")
    return absl::InvalidArgumentError(cat("unknown preset '", opt.preset, "' (tiny, k3-slice)"));
  checkpoint::DType dense;
  if (opt.dense_dtype == "bf16")
    dense = checkpoint::DType::kBF16;
  else if (opt.dense_dtype == "f16")
    dense = checkpoint::DType::kF16;
  else if (opt.dense_dtype == "f32")
    dense = checkpoint::DType::kF32;
  else
    return absl::InvalidArgumentError(
        cat("unknown dense dtype '", opt.dense_dtype, "' (bf16, f16, f32)"));
  if (opt.shards < 1 || opt.shards > 999)
    return absl::InvalidArgumentError("--shards must be in [1, 999]");
  Dims dims = preset_dims(opt.preset);
  for (const auto& [k, v] : opt.overrides) {
    if (!dims.count(k)) return absl::InvalidArgumentError(cat("unknown dimension '", k, "'"));
    dims[k] = v;
  }
  if (dims["mla_every"] < 1) return absl::InvalidArgumentError("mla_every must be >= 1");
  std::vector<NoEffect> no_effect = overrides_without_effect(dims, opt.overrides);
  dims["num_experts_per_token"] = std::min(dims["num_experts_per_token"], dims["num_experts"]);

  K3_ASSIGN_OR_RETURN(SyntheticTokenizer tok, make_synthetic_tokenizer(opt.vocab_ranks));
  const json config = make_config(dims, tok);
  const std::string config_text = config.dump(2) + "\n";
  // The generator's own output must pass the same validation as any checkpoint.
  K3_ASSIGN_OR_RETURN(checkpoint::ModelConfig c,
                      checkpoint::parse_model_config(config_text, "generated config"));
  K3_RETURN_IF_ERROR(check_out_dir(opt));

  std::vector<Unit> units = storage_units(c, dense, opt.seed);
  if (static_cast<int64_t>(units.size()) < opt.shards)
    return absl::InvalidArgumentError("more shards than tensors");
  uint64_t total = 0;
  for (const auto& u : units) total += u.bytes();

  // Cut the unit sequence into shards of about equal bytes.
  std::vector<size_t> cut = {0};
  {
    uint64_t acc = 0;
    for (size_t i = 0; i < units.size(); ++i) {
      acc += units[i].bytes();
      const int k = static_cast<int>(cut.size());
      const size_t remaining_units = units.size() - (i + 1);
      const int remaining_shards = opt.shards - k;
      if (k < opt.shards && remaining_units >= static_cast<size_t>(remaining_shards) &&
          (acc >= total / opt.shards * k ||
           remaining_units == static_cast<size_t>(remaining_shards)))
        cut.push_back(i + 1);
    }
    cut.push_back(units.size());
  }

  // The text model's shards, then the vision tower's own two (the projector,
  // then the tower), as the published snapshot stores them: names without
  // the language_model. prefix.
  std::vector<std::vector<const TensorSpec*>> shards(static_cast<size_t>(opt.shards));
  for (int s = 0; s < opt.shards; ++s)
    for (size_t u = cut[s]; u < cut[s + 1]; ++u)
      for (const TensorSpec& t : units[u].tensors) shards[s].push_back(&t);
  const std::vector<std::vector<TensorSpec>> vision = vision_shards(c.hidden_size, dense);
  for (const auto& v : vision) {
    shards.emplace_back();
    for (const TensorSpec& t : v) {
      shards.back().push_back(&t);
      total += t.nbytes();
    }
  }
  const int total_shards = static_cast<int>(shards.size());

  json weight_map = json::object();
  uint64_t written = 0;
  base::Progress progress("mkmodel", total, "B", !opt.progress);
  const size_t kChunk = 4u << 20;
  std::vector<char> buf(kChunk);
  for (int s = 0; s < total_shards; ++s) {
    char fname[64];
    std::snprintf(fname, sizeof fname, "model-%05d-of-%05d.safetensors", s + 1, total_shards);
    const std::string prefix = s < opt.shards ? std::string(kPrefix) : std::string();
    std::vector<checkpoint::SafetensorsWriter::Entry> entries;
    for (const TensorSpec* t : shards[s]) {
      entries.push_back({prefix + t->name, t->dtype, t->shape});
      weight_map[prefix + t->name] = fname;
    }
    K3_ASSIGN_OR_RETURN(auto w, checkpoint::SafetensorsWriter::create(opt.out_dir + "/" + fname,
                                                                      entries, {{"format", "pt"}}));
    for (const TensorSpec* tp : shards[s]) {
      const TensorSpec& t = *tp;
      const uint64_t key = stream_key(opt.seed, t.name);
      const size_t es = checkpoint::dtype_size(t.dtype);
      const uint64_t numel = t.numel();
      const uint64_t per_chunk = kChunk / es;
      for (uint64_t i0 = 0; i0 < numel; i0 += per_chunk) {
        const uint64_t n = std::min<uint64_t>(per_chunk, numel - i0);
        // Parallel fill of the chunk: each element is a pure function of its index.
#pragma omp parallel for schedule(static) if (n >= (1u << 20))
        for (int64_t b = 0; b < static_cast<int64_t>((n + 65535) / 65536); ++b) {
          const uint64_t j0 = static_cast<uint64_t>(b) * 65536;
          const uint64_t m = std::min<uint64_t>(65536, n - j0);
          fill_range(t, key, i0 + j0, m, buf.data() + j0 * es);
        }
        K3_RETURN_IF_ERROR(w->write(buf.data(), n * es));
        progress.advance(n * es);
      }
    }
    K3_RETURN_IF_ERROR(w->finish());
    written += w->file_size();
    log->info("wrote {} ({} tensors, {:.1f} MB)", fname, entries.size(), w->file_size() / 1e6);
  }

  progress.finish();
  json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  const json gen = {{"bos_token_id", tok.bos_id},
                    {"eos_token_id", tok.end_of_msg_id},
                    {"do_sample", true},
                    {"temperature", 1.0},
                    {"top_p", 0.95}};
  K3_RETURN_IF_ERROR(
      base::write_file_atomic(opt.out_dir + "/model.safetensors.index.json", index.dump(2) + "\n"));
  K3_RETURN_IF_ERROR(base::write_file_atomic(opt.out_dir + "/config.json", config_text));
  K3_RETURN_IF_ERROR(
      base::write_file_atomic(opt.out_dir + "/generation_config.json", gen.dump(2) + "\n"));
  K3_RETURN_IF_ERROR(base::write_file_atomic(opt.out_dir + "/tiktoken.model", tok.tiktoken_model));
  K3_RETURN_IF_ERROR(
      base::write_file_atomic(opt.out_dir + "/tokenizer_config.json", tok.tokenizer_config_json));

  MkModelResult r;
  r.bytes_written = written;
  r.shards = total_shards;
  r.vocab_size = tok.vocab_size;
  r.no_effect = std::move(no_effect);
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  return r;
}

}  // namespace k3::tools
