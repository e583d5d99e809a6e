#include "shared/checkpoint/checkpoint.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "shared/checkpoint/expert_index.h"
#include "shared/checkpoint/model_tensors.h"
#include "shared/kernels/convert.h"
#include "tests/test_util.h"
#include "tools/mkmodel/mkmodel.h"

namespace k3 {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::TempDir;

// A private copy of the tiny model that a test may edit.
std::string copy_model(const TempDir& tmp) {
  const std::string dst = tmp.file("model");
  fs::copy(testing::tiny_model_dir(), dst, fs::copy_options::recursive);
  return dst;
}

// The first tensor (by name) the index places in `shard`.
std::string first_tensor_of(const std::string& model, const std::string& shard) {
  const json index =
      json::parse(testing::read_file(model + "/model.safetensors.index.json"))["weight_map"];
  std::string first;
  for (auto it = index.begin(); it != index.end(); ++it)
    if (it.value() == shard && (first.empty() || it.key() < first)) first = it.key();
  return first;
}

TEST(Checkpoint, OpensAndValidatesTinyModelWithoutWritingToIt) {
  const std::string dir = testing::tiny_model_dir();
  const auto before = testing::dir_snapshot(dir);
  auto c = checkpoint::load_model_config(dir);
  ASSERT_TRUE(c.ok()) << c.status();
  auto ck = checkpoint::Checkpoint::open(dir);
  ASSERT_TRUE(ck.ok()) << ck.status();
  EXPECT_EQ((*ck)->prefix(), "language_model.");
  EXPECT_GE((*ck)->files().size(), 3u);
  ASSERT_TRUE(checkpoint::validate_checkpoint(**ck, *c).ok());
  size_t vision = 0;  // the tower and its projector, in shards of their own
  for (const checkpoint::TensorInfo& t : (*ck)->tensors())
    vision += checkpoint::is_outside_language_model(t.name, (*ck)->prefix());
  EXPECT_EQ(vision, 8u);
  EXPECT_EQ((*ck)->tensors().size(), checkpoint::all_tensors(*c).size() + vision);
  // Read every dense tensor through the converter.
  for (const checkpoint::ExpectedTensor& e : checkpoint::dense_tensors(*c)) {
    auto v = (*ck)->read_f32(e.name);
    ASSERT_TRUE(v.ok()) << e.name << ": " << v.status();
    for (float x : *v) ASSERT_TRUE(std::isfinite(x)) << e.name;
  }
  EXPECT_EQ(testing::dir_snapshot(dir), before);
}

TEST(Checkpoint, ExpertsAreContiguousAndNotInIdOrder) {
  const std::string dir = testing::tiny_model_dir();
  auto c = checkpoint::load_model_config(dir);
  auto ck = checkpoint::Checkpoint::open(dir);
  ASSERT_TRUE(ck.ok());
  auto idx = checkpoint::ExpertIndex::build(**ck, *c);
  ASSERT_TRUE(idx.ok()) << idx.status();
  EXPECT_EQ(idx->contiguous_count(), c->num_moe_layers() * c->num_experts);
  EXPECT_EQ(idx->expert_bytes(), c->expert_bytes());
  int out_of_order = 0;
  for (int64_t l = c->first_k_dense_replace; l < c->num_hidden_layers; ++l)
    for (int64_t e = 1; e < c->num_experts; ++e) {
      const auto& a = idx->at(l, e - 1);
      const auto& b = idx->at(l, e);
      if (a.file == b.file && b.offset < a.offset) ++out_of_order;
    }
  EXPECT_GT(out_of_order, 0) << "experts are stored in id order";
}

// ShardPolicy::kPresent opens what is there (a drive owns its shards) and
// the partial index says which experts that is; kDense never opens a shard
// for experts alone (every tiny text shard holds dense tensors: all opened)
// nor the vision tower's.
TEST(Checkpoint, PartialShardSets) {
  TempDir tmp;
  const std::string model = copy_model(tmp);
  auto c = checkpoint::load_model_config(model);
  const std::string gone = "model-00003-of-00005.safetensors";  // experts of layers 4 and 5
  fs::remove(model + "/" + gone);
  auto part = checkpoint::Checkpoint::open(model, {}, checkpoint::ShardPolicy::kPresent);
  ASSERT_TRUE(part.ok()) << part.status();
  EXPECT_EQ((*part)->unopened_shards(), std::vector<std::string>{gone});
  EXPECT_EQ((*part)->fingerprint(),
            (*checkpoint::Checkpoint::open(testing::tiny_model_dir()))->fingerprint());
  EXPECT_TRUE(checkpoint::validate_checkpoint(**part, *c, checkpoint::Required::kNothing).ok());
  EXPECT_FALSE(checkpoint::validate_checkpoint(**part, *c, checkpoint::Required::kDense).ok())
      << "dense tensors are gone too";
  EXPECT_FALSE(checkpoint::ExpertIndex::build(**part, *c).ok())
      << "a full index needs every expert";
  auto idx = checkpoint::ExpertIndex::build(**part, *c, /*partial=*/true);
  ASSERT_TRUE(idx.ok()) << idx.status();
  EXPECT_EQ(idx->total_count(), c->num_moe_layers() * c->num_experts);
  EXPECT_EQ(idx->present_count(), 3 * c->num_experts);
  EXPECT_TRUE(idx->present(3, 0));
  EXPECT_FALSE(idx->present(4, 0));
  EXPECT_FALSE(idx->present(0, 0)) << "a dense layer has no experts";
  EXPECT_FALSE(idx->present(3, c->num_experts));
  // kDense and kAll still want the shard.
  EXPECT_EQ(
      checkpoint::Checkpoint::open(model, {}, checkpoint::ShardPolicy::kDense).status().code(),
      absl::StatusCode::kNotFound);
  EXPECT_EQ(checkpoint::Checkpoint::open(model).status().code(), absl::StatusCode::kNotFound);
  auto dense =
      checkpoint::Checkpoint::open(testing::tiny_model_dir(), {}, checkpoint::ShardPolicy::kDense);
  ASSERT_TRUE(dense.ok());
  EXPECT_EQ(dense.value()->unopened_shards(),
            (std::vector<std::string>{"model-00004-of-00005.safetensors",
                                      "model-00005-of-00005.safetensors"}))
      << "the vision tower's shards are never opened for the dense part";
  EXPECT_TRUE(checkpoint::validate_checkpoint(**dense, *c, checkpoint::Required::kDense).ok());
  // No shard at all is an error, whatever the policy.
  for (const auto& f : fs::directory_iterator(model))
    if (f.path().extension() == ".safetensors") fs::remove(f.path());
  auto none = checkpoint::Checkpoint::open(model, {}, checkpoint::ShardPolicy::kPresent);
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound) << none.status();
}

// Issue 24: users drop the vision tower's shards (never read). Under every
// policy a missing shard of tensors the model does not use is listed, with a
// warning, and refused only by refuse_missing_shards() (--strict); a missing
// shard holding a tensor the model uses still fails, naming both.
TEST(Checkpoint, VisionShardsAreOptional) {
  TempDir tmp;
  const std::string model = copy_model(tmp);
  auto c = checkpoint::load_model_config(model);
  ASSERT_TRUE(c.ok());
  const std::string projector = "model-00004-of-00005.safetensors";
  const std::string tower = "model-00005-of-00005.safetensors";
  fs::remove(model + "/" + projector);
  fs::remove(model + "/" + tower);
  for (auto policy : {checkpoint::ShardPolicy::kAll, checkpoint::ShardPolicy::kDense,
                      checkpoint::ShardPolicy::kPresent}) {
    auto ck = checkpoint::Checkpoint::open(model, {}, policy);
    ASSERT_TRUE(ck.ok()) << static_cast<int>(policy) << ": " << ck.status();
    ASSERT_EQ((*ck)->missing_unused_shards().size(), 2u);
    EXPECT_EQ((*ck)->missing_unused_shards()[0].shard, projector);
    EXPECT_EQ(
        (*ck)->missing_unused_shards()[0].tensors,
        (std::vector<std::string>{"mm_projector.post_norm.weight", "mm_projector.proj.0.weight",
                                  "mm_projector.proj.2.weight"}));
    EXPECT_EQ((*ck)->missing_unused_shards()[1].shard, tower);
    EXPECT_EQ((*ck)->unopened_shards(), (std::vector<std::string>{projector, tower}));
    const std::vector<std::string> warnings = (*ck)->missing_shard_warnings();
    ASSERT_EQ(warnings.size(), 2u);
    EXPECT_EQ(warnings[0], "shard " + projector +
                               " named by the index is missing; its 3 tensor(s) are not used by "
                               "the model (mm_projector.post_norm.weight, "
                               "mm_projector.proj.0.weight, mm_projector.proj.2.weight)");
    EXPECT_EQ((*ck)->refuse_missing_shards().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_EQ((*ck)->refuse_missing_shards().message(),
              model + ": 2 shard(s) named by the index are missing (" + projector + ", " + tower +
                  "); they hold only tensors the model does not use (--strict)");
    EXPECT_TRUE(checkpoint::validate_checkpoint(**ck, *c,
                                                policy == checkpoint::ShardPolicy::kDense
                                                    ? checkpoint::Required::kDense
                                                    : checkpoint::Required::kAll)
                    .ok());
    EXPECT_EQ((*ck)->fingerprint(),
              (*checkpoint::Checkpoint::open(testing::tiny_model_dir()))->fingerprint());
  }
  // The complete snapshot has nothing to warn about.
  auto full = checkpoint::Checkpoint::open(testing::tiny_model_dir());
  ASSERT_TRUE(full.ok());
  EXPECT_TRUE((*full)->missing_unused_shards().empty());
  EXPECT_TRUE((*full)->missing_shard_warnings().empty());
  EXPECT_TRUE((*full)->refuse_missing_shards().ok());

  // A text shard gone as well: the shard and a tensor the model uses.
  const std::string text = "model-00001-of-00005.safetensors";
  const std::string first = first_tensor_of(model, text);
  fs::remove(model + "/" + text);
  for (auto policy : {checkpoint::ShardPolicy::kAll, checkpoint::ShardPolicy::kDense}) {
    auto ck = checkpoint::Checkpoint::open(model, {}, policy);
    ASSERT_FALSE(ck.ok());
    EXPECT_EQ(ck.status().code(), absl::StatusCode::kNotFound);
    EXPECT_EQ(ck.status().message(), "shard " + text + " named by the index is missing from " +
                                         model + "; it holds tensor '" + first +
                                         "', which the model uses");
  }
}

// Without the multimodal prefix the vision tower is still recognised by name.
TEST(Checkpoint, OutsideTheLanguageModel) {
  EXPECT_TRUE(checkpoint::is_outside_language_model("vision_tower.a", "language_model."));
  EXPECT_TRUE(checkpoint::is_outside_language_model("mm_projector.a", ""));
  EXPECT_TRUE(checkpoint::is_outside_language_model("multi_modal_projector.a", ""));
  EXPECT_TRUE(checkpoint::is_outside_language_model("vision_tower.a", ""));
  EXPECT_FALSE(checkpoint::is_outside_language_model("model.norm.weight", ""));
  EXPECT_FALSE(
      checkpoint::is_outside_language_model("language_model.model.norm.weight", "language_model."));
  EXPECT_TRUE(checkpoint::is_outside_language_model("model.norm.weight", "language_model."));
}

TEST(Checkpoint, ExtraShardDirectories) {
  TempDir tmp;
  const std::string model = copy_model(tmp);
  const std::string drive2 = tmp.file("drive2");
  fs::create_directory(drive2);
  const std::string shard = "model-00002-of-00005.safetensors";
  fs::rename(model + "/" + shard, drive2 + "/" + shard);

  auto missing = checkpoint::Checkpoint::open(model);
  ASSERT_FALSE(missing.ok());
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(missing.status().message(),
            "shard " + shard + " named by the index is missing from " + model +
                "; it holds tensor '" + first_tensor_of(model, shard) + "', which the model uses");

  auto split = checkpoint::Checkpoint::open(model, {drive2});
  ASSERT_TRUE(split.ok()) << split.status();
  auto c = checkpoint::load_model_config(model);
  EXPECT_TRUE(checkpoint::validate_checkpoint(**split, *c).ok());
  EXPECT_EQ((*split)->fingerprint(),
            (*checkpoint::Checkpoint::open(testing::tiny_model_dir()))->fingerprint());

  fs::copy_file(drive2 + "/" + shard, model + "/" + shard);
  auto both = checkpoint::Checkpoint::open(model, {drive2});
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().message(), "shard " + shard + " exists in both " + model + "/" + shard +
                                         " and " + drive2 + "/" + shard +
                                         "; each shard must live in exactly one directory");
}

// The identity (config, tensor list, sampled weights; not the layout) is
// tested in model_identity_test.cpp.

TEST(Checkpoint, IndexProblemsAreRefused) {
  TempDir tmp;
  const std::string model = copy_model(tmp);
  const std::string index_path = model + "/model.safetensors.index.json";
  const json index = json::parse(testing::read_file(index_path));

  json bad = index;
  bad["weight_map"]["language_model.model.ghost.weight"] = "model-00001-of-00005.safetensors";
  testing::write_file(index_path, bad.dump());
  auto r = checkpoint::Checkpoint::open(model);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            "index names tensor 'language_model.model.ghost.weight' in "
            "model-00001-of-00005.safetensors, which does not hold it");

  bad = index;
  bad["weight_map"]["language_model.model.norm.weight"] = "../../etc/passwd";
  testing::write_file(index_path, bad.dump());
  r = checkpoint::Checkpoint::open(model);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(),
            index_path +
                ": weight_map entry for 'language_model.model.norm.weight' names "
                "'../../etc/passwd', which is not a plain file name");

  testing::write_file(index_path, "{\"weight_map\": 3}");
  r = checkpoint::Checkpoint::open(model);
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(r.status().message(), index_path + ": missing weight_map object");
}

TEST(Checkpoint, ConfigInconsistentWithTensorsIsRefused) {
  TempDir tmp;
  const std::string model = copy_model(tmp);
  json config = json::parse(testing::read_file(model + "/config.json"));
  auto ck = checkpoint::Checkpoint::open(model);
  ASSERT_TRUE(ck.ok());

  json wide = config;
  wide["text_config"]["hidden_size"] = 256;
  auto c = checkpoint::parse_model_config(wide.dump());
  ASSERT_TRUE(c.ok());
  Status s = checkpoint::validate_checkpoint(**ck, *c);
  // One message naming the file, the tensor, what was expected and found.
  EXPECT_EQ(s.message(), (*ck)->files()[0] +
                             ": tensor 'language_model.model.embed_tokens.weight': expected "
                             "BF16, F16 or F32 [" +
                             std::to_string(c->vocab_size) + ", 256], found BF16 [" +
                             std::to_string(c->vocab_size) + ", 512]");

  json deeper = config;
  deeper["text_config"]["num_hidden_layers"] = 7;
  deeper["text_config"]["linear_attn_config"]["kda_layers"].push_back(7);
  c = checkpoint::parse_model_config(deeper.dump());
  ASSERT_TRUE(c.ok()) << c.status();
  s = checkpoint::validate_checkpoint(**ck, *c);
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.message(), model +
                             ": checkpoint is missing tensor "
                             "'language_model.model.layers.6.input_layernorm.weight'");
}

TEST(Checkpoint, RowsConvertFromEveryDenseDtype) {
  // The same seed written as BF16, F16 and F32: F32 holds the generator's
  // values, BF16/F16 their round-to-nearest-even images.
  TempDir tmp;
  std::map<std::string, std::unique_ptr<checkpoint::Checkpoint>> cks;
  for (const char* dt : {"bf16", "f16", "f32"}) {
    tools::MkModelOptions opt;
    opt.out_dir = tmp.file(dt);
    opt.dense_dtype = dt;
    opt.overrides = {{"num_hidden_layers", 2}, {"num_experts", 4}, {"hidden_size", 64}};
    ASSERT_TRUE(tools::make_model(opt).ok());
    auto ck = checkpoint::Checkpoint::open(opt.out_dir);
    ASSERT_TRUE(ck.ok());
    cks[dt] = std::move(*ck);
  }
  const std::string name = "model.layers.0.self_attn.q_proj.weight";
  const checkpoint::TensorInfo* t32 = cks["f32"]->find(name);
  ASSERT_NE(t32, nullptr);
  EXPECT_EQ(t32->dtype, checkpoint::DType::kF32);
  std::vector<float> f32(t32->cols() * 3), b16(f32.size()), h16(f32.size());
  ASSERT_TRUE(cks["f32"]->read_rows_f32(*t32, 5, 3, f32.data()).ok());
  ASSERT_TRUE(cks["bf16"]->read_rows_f32(*cks["bf16"]->find(name), 5, 3, b16.data()).ok());
  ASSERT_TRUE(cks["f16"]->read_rows_f32(*cks["f16"]->find(name), 5, 3, h16.data()).ok());
  for (size_t i = 0; i < f32.size(); ++i) {
    EXPECT_EQ(b16[i], kernels::bf16_to_f32_ref(kernels::f32_to_bf16(f32[i])));
    EXPECT_EQ(h16[i], kernels::f16_to_f32_ref(kernels::f32_to_f16(f32[i])));
  }
  EXPECT_FALSE(cks["f32"]->read_rows_f32(*t32, t32->rows() - 1, 2, f32.data()).ok());
}

// The experts are bound from the same table: a config implying another
// expert shape is refused naming file, tensor, expected and found.
TEST(ExpertIndex, WrongExpertShapeIsRefusedAtBinding) {
  auto ck = checkpoint::Checkpoint::open(testing::tiny_model_dir());
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  ASSERT_TRUE(ck.ok() && c.ok());
  checkpoint::ModelConfig wide = *c;
  wide.moe_intermediate_size *= 2;
  auto idx = checkpoint::ExpertIndex::build(**ck, wide);
  ASSERT_FALSE(idx.ok());
  const std::string want =
      "tensor 'language_model.model.layers.1.block_sparse_moe.experts.0.w1."
      "weight_packed': expected U8 [" +
      std::to_string(wide.moe_intermediate_size) + ", " +
      std::to_string(c->routed_expert_hidden_size / 2) + "], found U8 [" +
      std::to_string(c->moe_intermediate_size) + ", " +
      std::to_string(c->routed_expert_hidden_size / 2) + "]";
  EXPECT_NE(idx.status().message().find(want), std::string::npos) << idx.status();
}

}  // namespace
}  // namespace k3
