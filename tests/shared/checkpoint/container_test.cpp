// k3container.json is untrusted input: every malformed form is refused with
// the file and the field named, never a crash.
//
// The engine on a repacked container (shared/checkpoint/repack.h): the weights
// it prepared are bit-identical to quantizing the source at load, at every
// combination of dense 4/8, MLA 8/32 and head 8/32, on the tiny model and a
// small k3-slice; the 8 -> 4 downcast follows its definition; asking for more
// bits than the container holds is refused; unused tensors are reported.
#include "shared/checkpoint/container.h"

#include <gtest/gtest.h>

#include <cstring>
#include <nlohmann/json.hpp>

#include "engined/experts/source_factory.h"
#include "engined/model/model.h"
#include "engined/model/weights.h"
#include "shared/checkpoint/expert_index.h"
#include "shared/checkpoint/repack.h"
#include "shared/checkpoint/safetensors_writer.h"
#include "tests/test_util.h"
#include "tools/mkmodel/mkmodel.h"

namespace k3 {
namespace {

using testing::TempDir;

TEST(ContainerInfo, RoundTripsAndRefusesMalformedFiles) {
  TempDir tmp;
  auto none = checkpoint::read_container_info(tmp.path());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());

  checkpoint::ContainerInfo info;
  info.dense_bits = 8;
  info.mla_bits = 32;
  info.head_bits = 4;
  info.dense_only = true;
  info.shards = 1;
  info.fingerprint = 0x0123456789abcdefull;
  testing::write_file(tmp.file(checkpoint::kContainerFile), info.to_json());
  auto back = checkpoint::read_container_info(tmp.path());
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_TRUE(back->has_value());
  EXPECT_TRUE(**back == info);
  EXPECT_EQ((*back)->bits_for(checkpoint::QuantGroup::kMla), 32);
  EXPECT_EQ((*back)->bits_for(checkpoint::QuantGroup::kNone), 32);

  const std::string path = tmp.file(checkpoint::kContainerFile);
  for (const auto& [text, what] : std::vector<std::pair<std::string, std::string>>{
           {"not json", "not valid JSON"},
           {"[1]", "not a JSON object"},
           {R"({"format": 5})", "format is not k3serve-container"},
           {R"({"format": "k3serve-container", "version": 2})",
            "unsupported version (this build reads version 1)"},
           {R"({"format": "k3serve-container", "version": 1, "dense_bits": 6})",
            "dense_bits must be 4, 8 or 32"},
           {R"({"format": "k3serve-container", "version": 1, "dense_bits": 4, "mla_bits": 8,
                "head_bits": 8, "dense_only": false, "shards": 0})",
            "shards must be a positive integer"},
           {R"({"format": "k3serve-container", "version": 1, "dense_bits": 4, "mla_bits": 8,
                "head_bits": 8, "dense_only": false, "shards": 2, "fingerprint": 7})",
            "fingerprint must be 16 lower-case hex digits"},
       }) {
    testing::write_file(path, text);
    auto r = checkpoint::read_container_info(tmp.path());
    ASSERT_FALSE(r.ok()) << text;
    // (JSON syntax errors go on with the parser's details.)
    EXPECT_EQ(r.status().message().rfind(path + ": " + what, 0), 0u) << r.status() << text;
  }
}

}  // namespace
}  // namespace k3

namespace k3::engined {
namespace {

using testing::TempDir;

std::vector<float> score(const std::string& dir, const QuantConfig& q) {
  EngineOptions opt;
  opt.quant = q;
  opt.chunk = 5;
  auto m = Model::load(dir, {}, opt);
  EXPECT_TRUE(m.ok()) << m.status();
  if (!m.ok()) return {};
  std::vector<int32_t> ids;
  for (int i = 0; i < 9; ++i)
    ids.push_back(static_cast<int32_t>((i * 7919 + 13) % (*m)->config().vocab_size));
  auto experts = make_expert_source(ExpertSourceOptions{}, **m);
  EXPECT_TRUE(experts.ok()) << experts.status();
  if (!experts.ok()) return {};
  auto seq = (*m)->new_sequence();
  std::vector<float> logits;
  Status s = (*m)->forward(**experts, *seq, ids, static_cast<int64_t>(ids.size()), &logits);
  EXPECT_TRUE(s.ok()) << s;
  return logits;
}

checkpoint::RepackResult repack_to(const std::string& src, const std::string& out, int dense,
                                   int mla, int head) {
  checkpoint::RepackOptions o;
  o.model_dir = src;
  o.out_dir = out;
  o.dense_bits = dense;
  o.mla_bits = mla;
  o.head_bits = head;
  auto r = checkpoint::repack(o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : checkpoint::RepackResult{};
}

// A small k3-slice: the preset's layer pattern with dimensions cut down.
const std::string& small_slice_dir() {
  static TempDir dir;
  static const std::string path = [] {
    tools::MkModelOptions opt;
    opt.preset = "k3-slice";
    opt.out_dir = dir.path() + "/slice";
    opt.seed = 3;
    opt.overrides = {{"num_hidden_layers", 2},
                     {"num_experts", 4},
                     {"num_experts_per_token", 2},
                     {"hidden_size", 256},
                     {"intermediate_size", 512},
                     {"num_attention_heads", 2},
                     {"q_lora_rank", 64},
                     {"kv_lora_rank", 32},
                     {"qk_nope_head_dim", 32},
                     {"qk_rope_head_dim", 16},
                     {"v_head_dim", 32},
                     {"moe_intermediate_size", 64},
                     {"routed_expert_hidden_size", 128},
                     {"kda_num_heads", 2},
                     {"kda_head_dim", 64}};
    auto r = tools::make_model(opt);
    if (!r.ok()) throw std::runtime_error(std::string(r.status().message()));
    return opt.out_dir;
  }();
  return path;
}

void expect_bit_identity(const std::string& src) {
  for (int dense : {4, 8})
    for (int mla : {8, 32})
      for (int head : {8, 32}) {
        SCOPED_TRACE(src);
        SCOPED_TRACE("dense " + std::to_string(dense) + " mla " + std::to_string(mla) + " head " +
                     std::to_string(head));
        TempDir tmp;
        const std::string out = tmp.file("c");
        const checkpoint::RepackResult r = repack_to(src, out, dense, mla, head);
        // The container is what its choices imply (no silent f32 blow-up).
        EXPECT_LE(static_cast<double>(r.container_bytes),
                  1.05 * static_cast<double>(r.implied_bytes));
        EXPECT_EQ(r.shards_complete, r.shards);
        const QuantConfig q{dense, mla, head};
        const std::vector<float> want = score(src, q), got = score(out, q);
        ASSERT_FALSE(want.empty());
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
        // The container's matrices were taken prepared, not quantized again.
        auto ck = checkpoint::Checkpoint::open(out);
        ASSERT_TRUE(ck.ok());
        auto c = checkpoint::load_model_config(out);
        ASSERT_TRUE(c.ok());
        auto w = load_weights(**ck, *c, q);
        ASSERT_TRUE(w.ok()) << w.status();
        const LayerWeights& l0 = (*w)->layers[0];
        EXPECT_TRUE(l0.kda ? l0.kda_w.q.is_prepared() : l0.mla_w.q_a.is_prepared());
        EXPECT_EQ((*w)->lm_head.is_prepared(), head != 32);
      }
}

TEST(Container, LogitsBitIdenticalToLoadTimeQuantizationTiny) {
  expect_bit_identity(testing::tiny_model_dir());
}

TEST(Container, LogitsBitIdenticalToLoadTimeQuantizationSmallK3Slice) {
  expect_bit_identity(small_slice_dir());
}

// Every matrix of the dense group, flattened through row_f32.
// The layers' dense matrices the downcast test compares, in a fixed order.
template <typename Fn>
void for_each_dense_matrix(const ModelWeights& w, Fn&& put) {
  for (const LayerWeights& l : w.layers) {
    if (l.kda)
      for (const WeightMatrix* m : {&l.kda_w.q, &l.kda_w.k, &l.kda_w.v, &l.kda_w.g, &l.kda_w.o})
        put(*m);
    if (l.moe) {
      put(l.moe_w.lat_down);
      put(l.moe_w.lat_up);
    } else {
      put(l.ffn.gate);
      put(l.ffn.up);
      put(l.ffn.down);
    }
  }
}

std::vector<float> dense_rows(const ModelWeights& w) {
  std::vector<float> out;
  for_each_dense_matrix(w, [&](const WeightMatrix& m) {
    std::vector<float> row(static_cast<size_t>(m.cols()));
    for (int64_t r = 0; r < m.rows(); ++r) {
      m.row_f32(r, row.data());
      out.insert(out.end(), row.begin(), row.end());
    }
  });
  return out;
}

// A container at 8 bits loaded at 4: each row as the int8 kernels see it,
// quantized to int4 per 64-column group (not the bits of BF16 -> int4).
TEST(Container, DowncastEightToFourFollowsItsDefinition) {
  const std::string& src = testing::tiny_model_dir();
  TempDir tmp;
  const std::string out = tmp.file("c8");
  repack_to(src, out, 8, 8, 8);
  auto c = checkpoint::load_model_config(src);
  ASSERT_TRUE(c.ok());
  auto sck = checkpoint::Checkpoint::open(src);
  auto cck = checkpoint::Checkpoint::open(out);
  ASSERT_TRUE(sck.ok() && cck.ok());
  auto src8 = load_weights(**sck, *c, QuantConfig{8, 8, 8});
  auto down = load_weights(**cck, *c, QuantConfig{4, 8, 8});
  auto src4 = load_weights(**sck, *c, QuantConfig{4, 8, 8});
  ASSERT_TRUE(src8.ok() && down.ok() && src4.ok()) << down.status();
  // The definition, from the source's int8 matrices.
  std::vector<float> want;
  {
    auto put = [&](const WeightMatrix& m8) {
      kernels::DenseMatrix m4(4, m8.rows(), m8.cols());
      std::vector<float> row(static_cast<size_t>(m8.cols()));
      for (int64_t r = 0; r < m8.rows(); ++r) {
        m8.row_f32(r, row.data());
        m4.set_rows(r, 1, row.data());
      }
      for (int64_t r = 0; r < m4.rows(); ++r) {
        m4.row_f32(r, row.data());
        want.insert(want.end(), row.begin(), row.end());
      }
    };
    for_each_dense_matrix(**src8, put);
  }
  const std::vector<float> got = dense_rows(**down);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * sizeof(float)), 0);
  EXPECT_EQ((*down)->layers[0].ffn.gate.bits(), 4);
  // ... and it is not the straight BF16 -> int4 quantization.
  const std::vector<float> straight = dense_rows(**src4);
  ASSERT_EQ(straight.size(), got.size());
  EXPECT_NE(std::memcmp(got.data(), straight.data(), got.size() * sizeof(float)), 0);
}

TEST(Container, MoreBitsThanStoredAreRefused) {
  TempDir tmp;
  const std::string out = tmp.file("c4");
  repack_to(testing::tiny_model_dir(), out, 4, 8, 8);
  EngineOptions opt;
  opt.quant = {8, 8, 8};
  auto m = Model::load(out, {}, opt);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("is stored at 4 bits in this container, 8 were asked for "
                                      "(--dense-bits)"),
            std::string::npos)
      << m.status();
  opt.quant = {4, 32, 8};
  m = Model::load(out, {}, opt);
  ASSERT_FALSE(m.ok());
  EXPECT_NE(m.status().message().find("(--mla-bits)"), std::string::npos) << m.status();
}

// expertd's view: the container validates and its ExpertIndex finds every
// expert, one contiguous span each, holding the source's bytes.
TEST(Container, ExpertsAreByteIdenticalAndContiguous) {
  const std::string& src = testing::tiny_model_dir();
  TempDir tmp;
  const std::string out = tmp.file("c");
  repack_to(src, out, 4, 8, 8);
  auto c = checkpoint::load_model_config(src);
  auto sck = checkpoint::Checkpoint::open(src);
  auto cck = checkpoint::Checkpoint::open(out);
  ASSERT_TRUE(c.ok() && sck.ok() && cck.ok());
  EXPECT_TRUE(checkpoint::validate_checkpoint(**cck, *c).ok());
  EXPECT_EQ((*cck)->fingerprint(), (*sck)->fingerprint());
  EXPECT_EQ(testing::read_file(out + "/config.json"), testing::read_file(src + "/config.json"));
  auto si = checkpoint::ExpertIndex::build(**sck, *c);
  auto ci = checkpoint::ExpertIndex::build(**cck, *c);
  ASSERT_TRUE(si.ok() && ci.ok());
  const int64_t n = c->num_moe_layers() * c->num_experts;
  EXPECT_EQ(ci->contiguous_count(), n);
  std::vector<uint8_t> a(ci->expert_bytes()), b(ci->expert_bytes());
  uint64_t prev_end = 0;
  uint32_t prev_file = UINT32_MAX;
  for (int64_t l = c->first_k_dense_replace; l < c->num_hidden_layers; ++l)
    for (int64_t e = 0; e < c->num_experts; ++e) {
      const checkpoint::ExpertLocation& loc = ci->at(l, e);
      ASSERT_TRUE((*cck)->file(loc.file).pread_exact(b.data(), b.size(), loc.offset).ok());
      const checkpoint::ExpertLocation& s = si->at(l, e);
      for (int i = 0; i < 6; ++i)
        ASSERT_TRUE((*sck)
                        ->file(s.file)
                        .pread_exact(a.data() + si->layout().offset[i], si->layout().nbytes[i],
                                     s.tensor_offset[i])
                        .ok());
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size()), 0) << "layer " << l << " expert " << e;
      // (layer, id) order: each expert right after the previous one.
      if (loc.file == prev_file) EXPECT_EQ(loc.offset, prev_end);
      prev_file = loc.file;
      prev_end = loc.offset + loc.length;
    }
}

// Tensors the model does not use: a warning, an error with strict; the
// vision tower is left out of the report.
TEST(Container, UnusedTensorsWarnOrFailWithStrict) {
  TempDir tmp;
  const std::string model = tmp.file("m");
  repack_to(testing::tiny_model_dir(), model, 4, 8, 8);
  {
    auto w = checkpoint::SafetensorsWriter::create(
        model + "/extra.safetensors",
        {{"language_model.model.layers.0.stray.weight", checkpoint::DType::kF32, {4}},
         {"vision_tower.patch_embed.weight", checkpoint::DType::kF32, {4}}});
    ASSERT_TRUE(w.ok());
    std::vector<float> z(8, 0.0f);
    ASSERT_TRUE((*w)->write(z.data(), 16).ok());
    ASSERT_TRUE((*w)->write(z.data(), 16).ok());
    ASSERT_TRUE((*w)->finish().ok());
    auto idx = nlohmann::json::parse(testing::read_file(model + "/model.safetensors.index.json"));
    idx["weight_map"]["language_model.model.layers.0.stray.weight"] = "extra.safetensors";
    idx["weight_map"]["vision_tower.patch_embed.weight"] = "extra.safetensors";
    testing::write_file(model + "/model.safetensors.index.json", idx.dump());
  }
  EngineOptions opt;
  auto m = Model::load(model, {}, opt);
  EXPECT_TRUE(m.ok()) << m.status();
  opt.quant.strict = true;
  m = Model::load(model, {}, opt);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().message(), model +
                                      ": 1 tensor(s) the model does not use: "
                                      "language_model.model.layers.0.stray.weight (--strict)");
}

// A tensor of the wrong shape is refused where it is bound, naming the file,
// the tensor, what was expected and what was found.
TEST(Container, WrongShapeIsRefusedAtBinding) {
  TempDir tmp;
  const std::string model = tmp.file("m");
  repack_to(testing::tiny_model_dir(), model, 8, 8, 8);
  auto ck = checkpoint::Checkpoint::open(model);
  ASSERT_TRUE(ck.ok());
  auto c = checkpoint::load_model_config(model);
  ASSERT_TRUE(c.ok());
  checkpoint::ModelConfig wide = *c;
  wide.kda_num_heads *= 2;  // the config now implies a wider projection
  auto w = load_weights(**ck, wide, QuantConfig{8, 8, 8});
  ASSERT_FALSE(w.ok());
  EXPECT_NE(w.status().message().find(": tensor 'language_model.model.layers.0.self_attn.q_proj."
                                      "weight.q8': expected I8 ["),
            std::string::npos)
      << w.status();
  EXPECT_NE(w.status().message().find(", found I8 ["), std::string::npos) << w.status();
  EXPECT_EQ(w.status().message().rfind(model, 0), 0u) << w.status();
}

}  // namespace
}  // namespace k3::engined
