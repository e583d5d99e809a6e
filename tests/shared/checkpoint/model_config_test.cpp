#include "shared/checkpoint/model_config.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "shared/checkpoint/model_tensors.h"
#include "shared/checkpoint/safetensors_writer.h"
#include "shared/checkpoint/stop_tokens.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

using json = nlohmann::json;

json base_config() {
  json tc = {{"hidden_size", 64},
             {"num_hidden_layers", 4},
             {"vocab_size", 300},
             {"first_k_dense_replace", 1},
             {"intermediate_size", 96},
             {"num_attention_heads", 2},
             {"q_lora_rank", 32},
             {"kv_lora_rank", 16},
             {"qk_nope_head_dim", 8},
             {"qk_rope_head_dim", 4},
             {"v_head_dim", 8},
             {"num_experts", 8},
             {"num_experts_per_token", 2},
             {"moe_intermediate_size", 64},
             {"routed_expert_hidden_size", 32},
             {"num_shared_experts", 1},
             {"attn_res_block_size", 2},
             {"activation_situ_beta", 4},
             {"activation_situ_linear_beta", 25},
             {"rms_norm_eps", 1e-5},
             {"linear_attn_config",
              {{"num_heads", 2},
               {"head_dim", 16},
               {"short_conv_kernel_size", 4},
               {"gate_lower_bound", -5},
               {"kda_layers", {1, 2, 3}},
               {"full_attn_layers", {4}}}},
             {"bos_token_id", 256},
             {"eos_token_id", 258}};
  return {{"model_type", "kimi_k3"}, {"text_config", tc}};
}

std::string error_of(const json& j) {
  auto c = checkpoint::parse_model_config(j.dump());
  return c.ok() ? "<accepted>" : std::string(c.status().message());
}

TEST(ModelConfig, ParsesTextConfigAndDerivesSizes) {
  auto c = checkpoint::parse_model_config(base_config().dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->hidden_size, 64);
  EXPECT_EQ(c->kda_proj(), 32);
  EXPECT_EQ(c->shared_intermediate(), 64);
  EXPECT_TRUE(c->is_kda(0));
  EXPECT_FALSE(c->is_kda(3));
  EXPECT_FALSE(c->is_moe(0));
  EXPECT_TRUE(c->is_moe(1));
  EXPECT_DOUBLE_EQ(c->routed_scaling_factor, 1.0);
  // w1, w3: [64, 32]; w2: [32, 64]: 3 * (64*32/2 + 64*32/32).
  EXPECT_EQ(c->expert_bytes(), 3u * (1024 + 64));
}

TEST(ModelConfig, FallsBackToRootWithoutTextConfig) {
  json flat = base_config()["text_config"];
  auto c = checkpoint::parse_model_config(flat.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_hidden_layers, 4);
  flat.erase("hidden_size");
  EXPECT_EQ(error_of(flat), "config.json: hidden_size: missing");
}

struct BadCase {
  std::string name;
  std::function<void(json&)> mutate;
  std::string message;
};

TEST(ModelConfig, RefusesBadValuesNamingTheKey) {
  const std::vector<BadCase> cases = {
      {"missing", [](json& t) { t.erase("hidden_size"); },
       "config.json: text_config.hidden_size: missing"},
      {"string", [](json& t) { t["hidden_size"] = "64"; },
       "config.json: text_config.hidden_size: must be an integer"},
      {"fraction", [](json& t) { t["num_hidden_layers"] = 2.5; },
       "config.json: text_config.num_hidden_layers: must be an integer"},
      {"zero", [](json& t) { t["vocab_size"] = 0; },
       "config.json: text_config.vocab_size: 0 is outside [1, 4194304]"},
      {"dense beyond layers", [](json& t) { t["first_k_dense_replace"] = 5; },
       "config.json: text_config.first_k_dense_replace: 5 is outside [0, 4]"},
      {"topk", [](json& t) { t["num_experts_per_token"] = 9; },
       "config.json: text_config.num_experts_per_token: 9 exceeds num_experts 8"},
      {"mxfp4 groups", [](json& t) { t["moe_intermediate_size"] = 48; },
       "config.json: text_config.moe_intermediate_size: must be a multiple of 32 (MXFP4 groups)"},
      {"latent groups", [](json& t) { t["routed_expert_hidden_size"] = 40; },
       "config.json: text_config.routed_expert_hidden_size: must be a multiple of 32 (MXFP4 "
       "groups)"},
      {"groups", [](json& t) { t["n_group"] = 8; },
       "config.json: text_config.n_group: group-limited routing is not part of K3 (must be 1)"},
      {"eps", [](json& t) { t["rms_norm_eps"] = 0.5; },
       "config.json: text_config.rms_norm_eps: 0.5 is outside [1e-12, 0.1]"},
      {"nan-like", [](json& t) { t["activation_situ_beta"] = "inf"; },
       "config.json: text_config.activation_situ_beta: must be a number"},
      {"no linear", [](json& t) { t.erase("linear_attn_config"); },
       "config.json: text_config.linear_attn_config: missing or not an object"},
      {"kda range",
       [](json& t) {
         t["linear_attn_config"]["kda_layers"] = {1, 2, 5};
       },
       "config.json: text_config.linear_attn_config.kda_layers: layer 5 is outside [1, 4]"},
      {"kda twice",
       [](json& t) {
         t["linear_attn_config"]["kda_layers"] = {1, 1, 2};
       },
       "config.json: text_config.linear_attn_config.kda_layers: layer 1 is listed twice"},
      {"complement",
       [](json& t) {
         t["linear_attn_config"]["full_attn_layers"] = {3, 4};
       },
       "config.json: text_config.linear_attn_config.full_attn_layers: must be the complement of "
       "kda_layers (layer 3 is in both)"},
      {"neither", [](json& t) { t["linear_attn_config"]["full_attn_layers"] = json::array(); },
       "config.json: text_config.linear_attn_config.full_attn_layers: must be the complement of "
       "kda_layers (layer 4 is in neither)"},
      {"gate bound", [](json& t) { t["linear_attn_config"]["gate_lower_bound"] = 1; },
       "config.json: text_config.linear_attn_config.gate_lower_bound: 1 is outside [-100, "
       "-1e-06]"},
      {"conv", [](json& t) { t["linear_attn_config"]["short_conv_kernel_size"] = 0; },
       "config.json: text_config.linear_attn_config.short_conv_kernel_size: 0 is outside [1, 16]"},
      {"bos", [](json& t) { t["bos_token_id"] = -1; },
       "config.json: text_config.bos_token_id: -1 is outside [0, 299]"},
      {"tie", [](json& t) { t["tie_word_embeddings"] = 1; },
       "config.json: text_config.tie_word_embeddings: must be true or false"},
      {"huge", [](json& t) { t["hidden_size"] = 18446744073709551615ull; },
       "config.json: text_config.hidden_size: out of range"},
  };
  for (const auto& bc : cases) {
    json j = base_config();
    bc.mutate(j["text_config"]);
    EXPECT_EQ(error_of(j), bc.message) << bc.name;
  }
}

// The published Kimi-K3 config.json (tests/shared/checkpoint/data/, rebuilt
// from public sources): quantization_config inside text_config, the special
// ids at the root as well.
std::string published_config() {
  return testing::read_file(testing::source_dir() +
                            "/tests/shared/checkpoint/data/kimi_k3_config.json");
}

TEST(ModelConfig, AcceptsThePublishedConfigAndDerivesItsSizes) {
  auto c = checkpoint::parse_model_config(published_config());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_hidden_layers, 93);
  EXPECT_EQ(std::count(c->layer_is_kda.begin(), c->layer_is_kda.end(), true), 69);
  EXPECT_EQ(std::count(c->layer_is_kda.begin(), c->layer_is_kda.end(), false), 24);
  EXPECT_FALSE(c->is_kda(91)) << "layer 92 (1-indexed) is MLA";
  EXPECT_FALSE(c->is_kda(92)) << "and so is the final layer";
  EXPECT_EQ(c->num_experts, 896);
  EXPECT_EQ(c->num_moe_layers(), 92);
  EXPECT_EQ(c->expert_bytes(), 17547264u);
  EXPECT_EQ(c->bos_token_id, 163584);
  auto stops = checkpoint::stop_tokens({.config_json = published_config()}, nullptr);
  ASSERT_TRUE(stops.ok()) << stops.status();
  EXPECT_EQ(stops->ids, std::vector<int32_t>{163586})
      << "<|end_of_msg|>, at the root and in text_config";
  EXPECT_EQ(c->pad_token_id, 163839);
  EXPECT_EQ(c->vocab_size, 163840);
}

// The snapshot's bytes from the config: every tensor of the model table at
// the dtype the published shards store it in, the vision tower from the
// published index (a fixture: names, dtypes, shapes), laid out in the 96
// published shards and measured with our writer's header rule.
TEST(ModelConfig, PublishedConfigImpliesTheSnapshotsBytes) {
  auto c = checkpoint::parse_model_config(published_config());
  ASSERT_TRUE(c.ok()) << c.status();
  using checkpoint::DType;
  using Entry = checkpoint::SafetensorsWriter::Entry;
  // Shard i+1 holds layer i (its dense tensors and its experts); shard 94 the
  // embedding, the head and the final norms; 95 the projector, 96 the tower.
  std::vector<std::vector<Entry>> shards(96);
  auto ends_with = [](const std::string& s, std::string_view t) {
    return s.size() >= t.size() && s.compare(s.size() - t.size(), t.size(), t) == 0;
  };
  for (const checkpoint::ExpectedTensor& e : checkpoint::all_tensors(*c)) {
    Entry en{"language_model." + e.name, DType::kBF16, e.shape};
    // Stored F32 in the published shards: the KDA decay (A_log, zero-padded
    // from 96 heads to [128], and dt_bias), the short-conv taps, the KDA
    // output norm, the router's score-correction bias. Experts U8.
    if (e.cls == checkpoint::TensorClass::kExpertPacked ||
        e.cls == checkpoint::TensorClass::kExpertScale) {
      en.dtype = DType::kU8;
    } else if (e.cls == checkpoint::TensorClass::kALog) {
      en.dtype = DType::kF32;
      en.shape = {128};
    } else if (ends_with(e.name, "dt_bias") || ends_with(e.name, "conv1d.weight") ||
               ends_with(e.name, "o_norm.weight") || ends_with(e.name, "e_score_correction_bias")) {
      en.dtype = DType::kF32;
    }
    shards[e.layer >= 0 ? e.layer : 93].push_back(std::move(en));
  }
  const json vision = json::parse(testing::read_file(
      testing::source_dir() + "/tests/shared/checkpoint/data/kimi_k3_vision_tensors.json"));
  ASSERT_EQ(vision["tensors"].size(), 168u);
  for (const json& t : vision["tensors"]) {
    ASSERT_EQ(t["dtype"], "BF16");
    shards[t["shard"].get<int>() - 1].push_back(
        {t["name"].get<std::string>(), DType::kBF16, t["shape"].get<std::vector<int64_t>>()});
  }
  uint64_t files = 0, payload = 0;
  size_t tensors = 0;
  for (std::vector<Entry>& shard : shards) {
    // The order the published writer stores them in: the widest dtype
    // first, then by name (it wrote no __metadata__).
    std::sort(shard.begin(), shard.end(), [](const Entry& a, const Entry& b) {
      const size_t wa = checkpoint::dtype_size(a.dtype), wb = checkpoint::dtype_size(b.dtype);
      return wa != wb ? wa > wb : a.name < b.name;
    });
    auto n = checkpoint::SafetensorsWriter::file_size_of(shard);
    ASSERT_TRUE(n.ok()) << n.status();
    files += *n;
    for (const Entry& e : shard) {
      uint64_t b = checkpoint::dtype_size(e.dtype);
      for (int64_t d : e.shape) b *= static_cast<uint64_t>(d);
      payload += b;
    }
    tensors += shard.size();
  }
  EXPECT_EQ(tensors, 497220u);
  EXPECT_EQ(payload, 1560860324864u) << "the index's total_size";
  EXPECT_EQ(files, 1560936091448u) << "the 96 shard files";
}

TEST(ModelConfig, SpecialIdsFallBackToTheRoot) {
  json j = base_config();
  for (const char* k : {"bos_token_id", "eos_token_id"}) j["text_config"].erase(k);
  j["bos_token_id"] = 256;
  j["eos_token_id"] = {258, 257};
  j["pad_token_id"] = 299;
  auto c = checkpoint::parse_model_config(j.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->bos_token_id, 256);
  EXPECT_EQ(c->pad_token_id, 299);
  // text_config's win when it has them.
  j["text_config"]["eos_token_id"] = 259;
  c = checkpoint::parse_model_config(j.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->bos_token_id, -1);
  j["text_config"].erase("eos_token_id");
  j["pad_token_id"] = 300;
  EXPECT_EQ(error_of(j), "config.json: pad_token_id: 300 is outside [0, 299]");
}

TEST(ModelConfig, QuantizationMustBeTheExpertsMxfp4) {
  const json published = json::parse(published_config());
  struct Case {
    const char* name;
    void (*mutate)(json&);
    const char* message;
  };
  const Case cases[] = {
      {"format", [](json& q) { q["format"] = "nvfp4-pack-quantized"; },
       "config.json: text_config.quantization_config.format: \"nvfp4-pack-quantized\" is not "
       "supported (mxfp4-pack-quantized)"},
      {"method", [](json& q) { q["quant_method"] = "fp8"; },
       "config.json: text_config.quantization_config.quant_method: \"fp8\" is not supported "
       "(compressed-tensors)"},
      {"group", [](json& q) { q["config_groups"]["group_0"]["weights"]["group_size"] = 16; },
       "config.json: text_config.quantization_config.config_groups.group_0.weights.group_size: 16 "
       "is not supported (32)"},
      {"bits", [](json& q) { q["config_groups"]["group_0"]["weights"]["num_bits"] = 8; },
       "config.json: text_config.quantization_config.config_groups.group_0.weights.num_bits: 8 is "
       "not supported (4)"},
      {"type", [](json& q) { q["config_groups"]["group_0"]["weights"]["type"] = "int"; },
       "config.json: text_config.quantization_config.config_groups.group_0.weights.type: \"int\" "
       "is not supported (float: MXFP4's e2m1)"},
      {"shape", [](json& q) { q = 3; },
       "config.json: text_config.quantization_config: must be an object"},
  };
  for (const Case& qc : cases) {
    json j = published;
    qc.mutate(j["text_config"]["quantization_config"]);
    EXPECT_EQ(error_of(j), qc.message) << qc.name;
  }
  // At the root (older synthetic checkpoints): still checked, still accepted.
  json j = base_config();
  j["quantization_config"] = {{"quant_method", "compressed-tensors"},
                              {"format", "mxfp4-pack-quantized"}};
  EXPECT_EQ(error_of(j), "<accepted>");
  j["quantization_config"]["format"] = "int4";
  EXPECT_EQ(error_of(j),
            "config.json: quantization_config.format: \"int4\" is not supported "
            "(mxfp4-pack-quantized)");
}

TEST(ModelConfig, RefusesNonJson) {
  auto c = checkpoint::parse_model_config("{\"hidden_size\": ");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(std::string(c.status().message()).rfind("config.json: not valid JSON (", 0), 0u);
  EXPECT_EQ(error_of(json::array()), "config.json: not a JSON object");
  EXPECT_EQ(error_of(json{{"text_config", 3}}), "config.json: text_config is not an object");
  // Two values for one key: which one would we serve? Neither.
  auto d = checkpoint::parse_model_config(
      R"({"text_config": {"hidden_size": 64, "num_hidden_layers": 2, "hidden_size": 128}})");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), "config.json: duplicate key 'hidden_size' (at /text_config)");
}

}  // namespace
}  // namespace k3
