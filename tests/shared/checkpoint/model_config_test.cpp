#include "shared/checkpoint/model_config.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

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
  EXPECT_EQ(c->eos_token_ids, std::vector<int64_t>{258});
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

TEST(ModelConfig, EosMayBeAList) {
  json j = base_config();
  j["text_config"]["eos_token_id"] = {258, 257};
  auto c = checkpoint::parse_model_config(j.dump());
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->eos_token_ids, (std::vector<int64_t>{258, 257}));
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
      {"eos", [](json& t) { t["eos_token_id"] = 300; },
       "config.json: text_config.eos_token_id: 300 is outside [0, vocab_size)"},
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

TEST(ModelConfig, RefusesNonJson) {
  auto c = checkpoint::parse_model_config("{\"hidden_size\": ");
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(std::string(c.status().message()).rfind("config.json: not valid JSON (", 0), 0u);
  EXPECT_EQ(error_of(json::array()), "config.json: not a JSON object");
  EXPECT_EQ(error_of(json{{"text_config", 3}}), "config.json: text_config is not an object");
}

}  // namespace
}  // namespace k3
