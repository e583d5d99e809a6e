#include "tools/mkmodel/mkmodel.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>

#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/expert_index.h"
#include "tests/test_util.h"

namespace k3::tools {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using k3::testing::TempDir;

std::map<std::string, uint64_t> hashes(const std::string& dir) {
  std::map<std::string, uint64_t> h;
  for (const auto& e : fs::directory_iterator(dir))
    h[e.path().filename().string()] = k3::testing::hash_file(e.path().string());
  return h;
}

TEST(MkModel, SameSeedSameBytesOtherSeedOtherBytes) {
  TempDir tmp;
  MkModelOptions a;
  a.out_dir = tmp.file("a");
  a.seed = 7;
  MkModelOptions b = a;
  b.out_dir = tmp.file("b");
  MkModelOptions c = a;
  c.out_dir = tmp.file("c");
  c.seed = 8;
  ASSERT_TRUE(make_model(a).ok());
  ASSERT_TRUE(make_model(b).ok());
  ASSERT_TRUE(make_model(c).ok());
  const auto ha = hashes(a.out_dir), hb = hashes(b.out_dir), hc = hashes(c.out_dir);
  EXPECT_EQ(ha, hb);
  ASSERT_EQ(ha.size(), hc.size());
  EXPECT_NE(ha.at("model-00001-of-00005.safetensors"), hc.at("model-00001-of-00005.safetensors"));
  EXPECT_EQ(ha.at("tiktoken.model"), hc.at("tiktoken.model"))
      << "tokenizer does not depend on seed";
}

TEST(MkModel, TinyPresetHasTheArchitectureTheIssueAsksFor) {
  const std::string dir = k3::testing::tiny_model_dir();
  auto c = checkpoint::load_model_config(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_hidden_layers, 6);
  EXPECT_EQ(c->first_k_dense_replace, 1);
  EXPECT_EQ(c->attn_res_block_size, 2);
  EXPECT_EQ(c->num_experts, 32);
  EXPECT_EQ(c->num_experts_per_token, 4);
  EXPECT_EQ(c->routed_expert_hidden_size, 256);
  EXPECT_EQ(c->hidden_size, 512);
  // MLA at every 4th (1-indexed) and the final layer.
  EXPECT_EQ(c->layer_is_kda, (std::vector<bool>{true, true, true, false, true, false}));
  const json config = json::parse(k3::testing::read_file(dir + "/config.json"));
  EXPECT_TRUE(config.contains("text_config"));
  EXPECT_TRUE(fs::exists(dir + "/generation_config.json"));
  auto ck = checkpoint::Checkpoint::open(dir);
  ASSERT_TRUE(ck.ok());
  EXPECT_EQ((*ck)->files().size(), 5u) << "three text shards, the vision tower's two";
  EXPECT_EQ((*ck)->prefix(), "language_model.");
}

// Issue 24: the published snapshot's layout. config.json: quantization_config
// inside text_config only, the special ids at the root and in text_config;
// the vision tower as vision_tower.* and mm_projector.* (no language_model.
// prefix) in two shards of its own, named by the index.
TEST(MkModel, WritesThePublishedLayout) {
  const std::string dir = k3::testing::tiny_model_dir();
  const json config = json::parse(k3::testing::read_file(dir + "/config.json"));
  EXPECT_FALSE(config.contains("quantization_config"));
  const json& tc = config["text_config"];
  const json& q = tc["quantization_config"];
  EXPECT_EQ(q["quant_method"], "compressed-tensors");
  EXPECT_EQ(q["format"], "mxfp4-pack-quantized");
  EXPECT_EQ(q["config_groups"]["group_0"]["weights"]["group_size"], 32);
  EXPECT_EQ(q["config_groups"]["group_0"]["weights"]["num_bits"], 4);
  EXPECT_EQ(q["ignore"], (json{"re:.*self_attn.*", "re:.*shared_experts.*",
                               "re:.*mlp\\.(gate|up|gate_up|down)_proj.*", "re:.*lm_head.*",
                               "re:.*vision_tower.*", "re:.*mm_projector.*"}));
  for (const char* k : {"bos_token_id", "eos_token_id", "pad_token_id"}) {
    ASSERT_TRUE(config.contains(k)) << k;
    EXPECT_EQ(config[k], tc[k]) << k;
  }
  EXPECT_EQ(config["model_type"], "kimi_k3");
  EXPECT_EQ(tc["model_type"], "kimi_linear");
  auto c = checkpoint::parse_model_config(config.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  const int64_t ranks = c->vocab_size - 256;
  EXPECT_EQ(config["pad_token_id"], ranks + 255) << "[PAD]";
  EXPECT_EQ(config["media_placeholder_token_id"], ranks + 21) << "<|media_pad|>";
  EXPECT_EQ(config["eos_token_id"], ranks + 2) << "<|end_of_msg|> only, as published";

  const json index =
      json::parse(k3::testing::read_file(dir + "/model.safetensors.index.json"))["weight_map"];
  std::map<std::string, std::set<std::string>> by_shard;
  for (auto it = index.begin(); it != index.end(); ++it)
    by_shard[it.value().get<std::string>()].insert(it.key());
  ASSERT_EQ(by_shard.size(), 5u);
  EXPECT_EQ(by_shard["model-00004-of-00005.safetensors"],
            (std::set<std::string>{"mm_projector.post_norm.weight", "mm_projector.proj.0.weight",
                                   "mm_projector.proj.2.weight"}));
  const std::set<std::string>& tower = by_shard["model-00005-of-00005.safetensors"];
  EXPECT_GE(tower.size(), 3u);
  for (const std::string& n : tower) EXPECT_EQ(n.rfind("vision_tower.", 0), 0u) << n;
  for (int s = 1; s <= 3; ++s)
    for (const std::string& n : by_shard[cat("model-0000", s, "-of-00005.safetensors")])
      EXPECT_EQ(n.rfind("language_model.", 0), 0u) << n;
  // Present, readable, and outside what the model binds.
  auto ck = checkpoint::Checkpoint::open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status();
  const checkpoint::TensorInfo* proj = nullptr;
  for (const checkpoint::TensorInfo& t : (*ck)->tensors())
    if (t.name == "mm_projector.proj.2.weight") proj = &t;
  ASSERT_NE(proj, nullptr);
  EXPECT_EQ(proj->shape, (std::vector<int64_t>{c->hidden_size, 128}));
  EXPECT_TRUE(checkpoint::validate_checkpoint(**ck, *c).ok());
}

TEST(MkModel, ALogIsZeroPaddedBeyondTheHeads) {
  const std::string dir = k3::testing::tiny_model_dir();
  auto ck = checkpoint::Checkpoint::open(dir);
  ASSERT_TRUE(ck.ok());
  const checkpoint::TensorInfo* t = (*ck)->find("model.layers.0.self_attn.A_log");
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->shape, std::vector<int64_t>{8});  // 4 heads stored as [8]
  auto v = (*ck)->read_f32("model.layers.0.self_attn.A_log");
  ASSERT_TRUE(v.ok());
  for (int i = 0; i < 4; ++i) EXPECT_GT((*v)[i], 0.0f) << i;
  for (int i = 4; i < 8; ++i) EXPECT_EQ((*v)[i], 0.0f) << i;
}

TEST(MkModel, NeverWritesMxfp4NanScale) {
  const std::string dir = k3::testing::tiny_model_dir();
  auto c = checkpoint::load_model_config(dir);
  auto ck = checkpoint::Checkpoint::open(dir);
  ASSERT_TRUE(ck.ok());
  auto idx = checkpoint::ExpertIndex::build(**ck, *c);
  ASSERT_TRUE(idx.ok());
  const auto& loc = idx->at(3, 5);
  std::vector<uint8_t> buf(loc.length);
  ASSERT_TRUE((*ck)->file(loc.file).pread_exact(buf.data(), buf.size(), loc.offset).ok());
  const auto& lay = idx->layout();
  for (int t : {1, 3, 5})  // the scale tensors
    for (uint64_t i = 0; i < lay.nbytes[t]; ++i) {
      ASSERT_NE(buf[lay.offset[t] + i], 255);
      ASSERT_GT(buf[lay.offset[t] + i], 100);  // weights far from the ue8m0 extremes
    }
}

// The 16 named added tokens of the published tokenizer_config.json, at the
// published offsets from the end of the ranks ([BOS] 163584 over 163,584
// ranks), and eos_token [EOS].
TEST(MkModel, TokenizerFilesNameTheControlTokens) {
  const std::string dir = k3::testing::tiny_model_dir();
  auto c = checkpoint::load_model_config(dir);
  ASSERT_TRUE(c.ok());
  std::istringstream ranks(k3::testing::read_file(dir + "/tiktoken.model"));
  std::string token;
  int64_t rank = 0, expect = 0;
  while (ranks >> token >> rank) EXPECT_EQ(rank, expect++);
  EXPECT_GE(expect, 1000);
  EXPECT_EQ(c->vocab_size, expect + 256);
  const json tc = json::parse(k3::testing::read_file(dir + "/tokenizer_config.json"));
  EXPECT_EQ(tc["eos_token"], "[EOS]");
  EXPECT_EQ(tc["bos_token"], "[BOS]");
  std::map<int64_t, std::pair<std::string, bool>> added;
  for (auto it = tc["added_tokens_decoder"].begin(); it != tc["added_tokens_decoder"].end(); ++it)
    added[std::stoll(it.key()) - expect] = {it.value()["content"], it.value()["special"]};
  const std::map<int64_t, std::pair<std::string, bool>> published = {
      {0, {"[BOS]", true}},
      {1, {"[EOS]", true}},
      {2, {"<|end_of_msg|>", true}},
      {3, {"<|open|>", false}},
      {4, {"<|close|>", false}},
      {5, {"<|sep|>", false}},
      {6, {"[start_header_id]", true}},
      {7, {"[end_header_id]", true}},
      {9, {"[EOT]", true}},
      {18, {"<|media_begin|>", true}},
      {19, {"<|media_content|>", true}},
      {20, {"<|media_end|>", true}},
      {21, {"<|media_pad|>", true}},
      {65, {"<osagent_mode>", true}},
      {254, {"[UNK]", true}},
      {255, {"[PAD]", true}},
  };
  EXPECT_EQ(added, published);
  // config.json names <|end_of_msg|> alone, as published ([EOS] comes from
  // tokenizer_config.json through the stop rule).
  const json config = json::parse(k3::testing::read_file(dir + "/config.json"));
  EXPECT_EQ(config["eos_token_id"], expect + 2);
  EXPECT_EQ(config["text_config"]["eos_token_id"], expect + 2);
  EXPECT_EQ(c->bos_token_id, expect);
  EXPECT_EQ(c->pad_token_id, expect + 255);
}

TEST(MkModel, OverridesGiveOddShapesThatStillValidate) {
  TempDir tmp;
  MkModelOptions o;
  o.out_dir = tmp.file("odd");
  o.shards = 4;
  o.overrides = {{"hidden_size", 200},
                 {"num_hidden_layers", 5},
                 {"num_experts", 7},
                 {"num_experts_per_token", 3},
                 {"kda_num_heads", 3},
                 {"kda_head_dim", 24},
                 {"num_attention_heads", 3},
                 {"attn_res_block_size", 3},
                 {"moe_intermediate_size", 96},
                 {"routed_expert_hidden_size", 160},
                 {"short_conv_kernel_size", 3},
                 {"mla_every", 2}};
  auto r = make_model(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->shards, 6);
  auto c = checkpoint::load_model_config(o.out_dir);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->hidden_size, 200);
  EXPECT_EQ(c->layer_is_kda, (std::vector<bool>{true, false, true, false, false}));
  auto ck = checkpoint::Checkpoint::open(o.out_dir);
  ASSERT_TRUE(ck.ok());
  EXPECT_EQ((*ck)->files().size(), 6u) << "four text shards, the vision tower's two";
  EXPECT_TRUE(checkpoint::validate_checkpoint(**ck, *c).ok());
  EXPECT_EQ((*ck)->find("model.layers.0.self_attn.A_log")->shape, std::vector<int64_t>{4});
}

TEST(MkModel, K3SliceHasRealExpertShapes) {
  TempDir tmp;
  MkModelOptions o;
  o.preset = "k3-slice";
  o.out_dir = tmp.file("slice");
  // Real hidden and expert dims; the dense side kept small for the test.
  o.overrides = {{"num_hidden_layers", 2}, {"num_experts", 2},         {"intermediate_size", 64},
                 {"kda_num_heads", 2},     {"num_attention_heads", 2}, {"q_lora_rank", 64},
                 {"num_shared_experts", 0}};
  auto r = make_model(o);
  ASSERT_TRUE(r.ok()) << r.status();
  auto c = checkpoint::load_model_config(o.out_dir);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->hidden_size, 7168);
  EXPECT_EQ(c->routed_expert_hidden_size, 3584);
  EXPECT_EQ(c->moe_intermediate_size, 3072);
  EXPECT_EQ(c->expert_bytes(), 17547264u);  // 17.55 MB
  auto ck = checkpoint::Checkpoint::open(o.out_dir);
  ASSERT_TRUE(ck.ok());
  EXPECT_TRUE(checkpoint::validate_checkpoint(**ck, *c).ok());
}

TEST(MkModel, RefusesBadRequests) {
  TempDir tmp;
  MkModelOptions o;
  o.out_dir = tmp.path();
  k3::testing::write_file(tmp.file("precious.txt"), "keep me");
  auto r = make_model(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            tmp.path() + " is not empty (use --force to overwrite the model files in it)");
  EXPECT_EQ(k3::testing::read_file(tmp.file("precious.txt")), "keep me");

  o.out_dir = tmp.file("x");
  o.overrides = {{"moe_intermediate_size", 100}};
  r = make_model(o);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "generated config: text_config.moe_intermediate_size: must be a multiple of 32 (MXFP4 "
            "groups)");
  o.overrides = {{"no_such_dim", 1}};
  EXPECT_EQ(make_model(o).status().message(), "unknown dimension 'no_such_dim'");
  o.overrides = {};
  o.preset = "huge";
  EXPECT_EQ(make_model(o).status().message(), "unknown preset 'huge' (tiny, k3-slice)");
}

std::vector<std::string> keys(const std::vector<NoEffect>& v) {
  std::vector<std::string> k;
  for (const NoEffect& n : v) k.push_back(n.key);
  return k;
}

TEST(MkModel, OverridesWithoutEffectAreNamed) {
  TempDir tmp;
  MkModelOptions o;
  o.out_dir = tmp.file("all-dense");
  o.progress = false;
  // Every layer dense and MLA: expert and KDA knobs do nothing.
  o.overrides = {{"num_hidden_layers", 2}, {"first_k_dense_replace", 2},
                 {"num_experts", 8},       {"num_experts_per_token", 3},
                 {"mla_every", 1},         {"kda_num_heads", 4},
                 {"hidden_size", 128}};
  auto r = make_model(o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(keys(r->no_effect),
            (std::vector<std::string>{"kda_num_heads", "num_experts", "num_experts_per_token"}));
  EXPECT_NE(r->no_effect[1].why.find("no MoE layer"), std::string::npos) << r->no_effect[1].why;

  MkModelOptions p;
  p.out_dir = tmp.file("no-dense");
  p.progress = false;
  p.overrides = {{"first_k_dense_replace", 0},
                 {"intermediate_size", 64},
                 {"num_experts", 4},
                 {"num_experts_per_token", 9}};
  r = make_model(p);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(keys(r->no_effect),
            (std::vector<std::string>{"intermediate_size", "num_experts_per_token"}));
  EXPECT_NE(r->no_effect[1].why.find("clamped to 4"), std::string::npos);

  MkModelOptions q;
  q.out_dir = tmp.file("all-used");
  q.progress = false;
  q.overrides = {{"num_experts", 8}, {"kda_num_heads", 4}, {"intermediate_size", 64}};
  r = make_model(q);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->no_effect.empty());
}

// k3ctl mkmodel as a process, stderr a pipe: the warnings, and progress as
// log lines (K3_PROGRESS_LOG_SECONDS makes them frequent), no bar.
TEST(MkModel, K3ctlWarnsAndLogsProgressLinesWhenNotOnATerminal) {
  TempDir tmp;
  const auto r = k3::testing::run_command({"/usr/bin/env", "K3_PROGRESS_LOG_SECONDS=0.001",
                                           k3::testing::bin_dir() + "/k3ctl", "mkmodel", "--out",
                                           tmp.file("m"), "--layers", "2", "--dense-layers", "2",
                                           "--experts", "8"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("k3ctl mkmodel: warning: --experts has no effect: the model has no MoE "
                       "layer"),
            std::string::npos)
      << r.err;
  int progress_lines = 0;
  std::istringstream lines(r.err);
  for (std::string line; std::getline(lines, line);) {
    if (line.rfind("mkmodel: ", 0) != 0) continue;
    ++progress_lines;
    EXPECT_NE(line.find("% ("), std::string::npos) << line;
    EXPECT_NE(line.find(", ETA "), std::string::npos) << line;
    EXPECT_EQ(line.find('['), std::string::npos) << "a bar off a terminal: " << line;
  }
  EXPECT_EQ(r.err.find('\r'), std::string::npos);
  EXPECT_GE(progress_lines, 2) << r.err;
  EXPECT_NE(r.err.find("mkmodel: 100.0% ("), std::string::npos) << r.err;
}

}  // namespace
}  // namespace k3::tools
