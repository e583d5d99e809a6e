// The model through its C++ API (on the tiny model, in process).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <set>

#include "engined/experts/source_factory.h"
#include "engined/model/model.h"
#include "tests/test_util.h"

namespace k3::engined {

using k3::experts::ExpertSource;
namespace {

// A model with its in-process expert source.
struct Engine {
  std::unique_ptr<Model> model;
  std::unique_ptr<ExpertSource> experts;
  Model* operator->() const { return model.get(); }
  explicit operator bool() const { return model && experts; }
  Status forward(SequenceState& seq, const std::vector<int32_t>& ids, int64_t n_logits,
                 std::vector<float>* logits) {
    return model->forward(*experts, seq, ids, n_logits, logits);
  }
};

Engine load(const std::string& dir, EngineOptions opt = {}, ExpertSourceOptions xo = {}) {
  Engine e;
  auto m = Model::load(dir, {}, opt);
  if (!m.ok()) {
    ADD_FAILURE() << m.status();
    return e;
  }
  e.model = std::move(*m);
  auto x = make_expert_source(xo, *e.model);
  if (!x.ok()) {
    ADD_FAILURE() << x.status();
    return e;
  }
  e.experts = std::move(*x);
  return e;
}

std::vector<int32_t> prompt(int n, int32_t vocab) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>((i * 7919 + 13) % vocab));
  return ids;
}

std::vector<float> score(Engine& m, const std::vector<int32_t>& ids) {
  auto seq = m->new_sequence();
  std::vector<float> logits;
  Status s = m.forward(*seq, ids, static_cast<int64_t>(ids.size()), &logits);
  EXPECT_TRUE(s.ok()) << s;
  return logits;
}

// Chunked prefill is bit-identical to token-at-a-time, at every chunk size,
// with both expert kernels and quantized dense weights.
TEST(Engine, ChunkedPrefillIsBitIdenticalToTokenAtATime) {
  for (bool int8 : {false, true}) {
    EngineOptions opt;
    opt.int8_experts = int8;
    opt.chunk = 1;
    auto one = load(testing::tiny_model_dir(), opt);
    ASSERT_TRUE(one);
    const auto ids = prompt(45, static_cast<int32_t>(one->config().vocab_size));
    const auto ref = score(one, ids);
    for (int64_t chunk : {7, 32, 64}) {
      opt.chunk = chunk;
      auto m = load(testing::tiny_model_dir(), opt);
      const auto got = score(m, ids);
      ASSERT_EQ(got.size(), ref.size());
      EXPECT_EQ(std::memcmp(got.data(), ref.data(), got.size() * sizeof(float)), 0)
          << "chunk " << chunk << " int8 " << int8;
    }
  }
}

// The last prompt position through prefill equals the same position reached
// by decoding it as a single token after the rest.
TEST(Engine, PrefillLastPositionEqualsDecode) {
  auto m = load(testing::tiny_model_dir());
  ASSERT_TRUE(m);
  const int64_t V = m->config().vocab_size;
  const auto ids = prompt(20, static_cast<int32_t>(V));
  std::vector<float> prefill, head, decode;
  auto a = m->new_sequence();
  ASSERT_TRUE(m.forward(*a, ids, 1, &prefill).ok());
  auto b = m->new_sequence();
  std::vector<int32_t> first(ids.begin(), ids.end() - 1);
  ASSERT_TRUE(m.forward(*b, first, 1, &head).ok());
  ASSERT_TRUE(m.forward(*b, {ids.back()}, 1, &decode).ok());
  ASSERT_EQ(prefill.size(), static_cast<size_t>(V));
  EXPECT_EQ(std::memcmp(prefill.data(), decode.data(), V * sizeof(float)), 0);
  EXPECT_EQ(a->position, 20);
  EXPECT_EQ(b->position, 20);
  // And the full teacher-forced pass agrees with both at that position.
  const auto all = score(m, ids);
  EXPECT_EQ(std::memcmp(all.data() + 19 * V, decode.data(), V * sizeof(float)), 0);
}

TEST(Engine, LogitsAreFiniteAndNotDegenerate) {
  auto m = load(testing::tiny_model_dir());
  ASSERT_TRUE(m);
  const int64_t V = m->config().vocab_size;
  const auto ids = prompt(16, static_cast<int32_t>(V));
  const auto logits = score(m, ids);
  std::set<int64_t> argmaxes;
  for (int64_t t = 0; t < 16; ++t) {
    const float* row = logits.data() + t * V;
    double mean = 0, var = 0;
    for (int64_t i = 0; i < V; ++i) {
      ASSERT_TRUE(std::isfinite(row[i]));
      mean += row[i];
    }
    mean /= V;
    for (int64_t i = 0; i < V; ++i) var += (row[i] - mean) * (row[i] - mean);
    EXPECT_GT(std::sqrt(var / V), 0.2) << "flat logits at " << t;
    argmaxes.insert(std::max_element(row, row + V) - row);
  }
  EXPECT_GT(argmaxes.size(), 8u);
}

// The expert cache budget changes I/O, never results; a one-slot budget still
// works (slots floor at loader threads + 1).
TEST(Engine, ExpertCacheBudgetDoesNotChangeResults) {
  // Read counts compared exactly: no speculative reads (speculator_test.cpp).
  EngineOptions big;
  big.speculation = SpeculationMode::kOff;
  auto a = load(testing::tiny_model_dir(), big);
  ExpertSourceOptions small;
  small.cache_bytes = 1;
  small.loader_threads = 1;
  small.direct_io = false;
  auto b = load(testing::tiny_model_dir(), big, small);
  ASSERT_TRUE(a && b);
  const auto ids = prompt(12, static_cast<int32_t>(a->config().vocab_size));
  const auto la = score(a, ids), lb = score(b, ids);
  EXPECT_EQ(std::memcmp(la.data(), lb.data(), la.size() * sizeof(float)), 0);
  const auto sa = a.experts->stats(), sb = b.experts->stats();
  EXPECT_EQ(sa.requests, sb.requests);
  EXPECT_EQ(sa.reads, sb.reads) << "one chunk: each (layer, expert) is read once either way";
  EXPECT_EQ(sb.bytes_read, sb.reads * a->config().expert_bytes());
  // Scoring the same prompt again: the big cache serves every expert, the
  // 2-slot cache reads them all again, and the logits stay identical.
  EXPECT_EQ(std::memcmp(score(a, ids).data(), la.data(), la.size() * sizeof(float)), 0);
  EXPECT_EQ(std::memcmp(score(b, ids).data(), la.data(), la.size() * sizeof(float)), 0);
  EXPECT_EQ(a.experts->stats().reads, sa.reads);
  EXPECT_EQ(a.experts->stats().hits, sa.hits + sa.requests);
  EXPECT_EQ(b.experts->stats().reads, 2 * sb.reads);
}

TEST(Engine, BadInputsAreRefusedAndStateStaysUsable) {
  auto m = load(testing::tiny_model_dir());
  ASSERT_TRUE(m);
  auto seq = m->new_sequence();
  std::vector<float> logits;
  Status s = m.forward(*seq, {}, 0, &logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(msg(s), "empty prompt: no token ids");
  const int32_t V = static_cast<int32_t>(m->config().vocab_size);
  s = m.forward(*seq, {1, V}, 1, &logits);
  EXPECT_EQ(msg(s), cat("token id ", V, " at position 1 is outside the vocabulary [0, ", V, ")"));
  s = m.forward(*seq, {1, -3}, 1, &logits);
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(seq->position, 0) << "refused input must not advance the sequence";
  EXPECT_TRUE(m.forward(*seq, {1, 2}, 1, &logits).ok());
}

// Issue 24: a snapshot without its vision shards loads and computes the same
// logits (nothing reads the tower), refused under --strict; without a text
// shard the load fails naming the shard and a tensor the model uses.
TEST(Engine, ServesASnapshotWithoutItsVisionShards) {
  testing::TempDir tmp;
  const std::string dir = tmp.file("model");
  std::filesystem::copy(testing::tiny_model_dir(), dir, std::filesystem::copy_options::recursive);
  std::filesystem::remove(dir + "/model-00004-of-00005.safetensors");
  std::filesystem::remove(dir + "/model-00005-of-00005.safetensors");
  Engine full = load(testing::tiny_model_dir());
  Engine part = load(dir);
  ASSERT_TRUE(full && part);
  const std::vector<int32_t> ids = prompt(5, static_cast<int32_t>(full->config().vocab_size));
  auto a = full->new_sequence(), b = part->new_sequence();
  std::vector<float> la, lb;
  ASSERT_TRUE(full.forward(*a, ids, 1, &la).ok());
  ASSERT_TRUE(part.forward(*b, ids, 1, &lb).ok());
  EXPECT_EQ(la, lb);

  EngineOptions strict;
  strict.quant.strict = true;
  auto m = Model::load(dir, {}, strict);
  ASSERT_FALSE(m.ok());
  EXPECT_EQ(m.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_CONTAINS(std::string(m.status().message()),
                  "model-00005-of-00005.safetensors); they hold only "
                  "tensors the model does not use (--strict)");

  std::filesystem::remove(dir + "/model-00001-of-00005.safetensors");
  m = Model::load(dir, {}, EngineOptions{});
  ASSERT_FALSE(m.ok());
  EXPECT_CONTAINS(std::string(m.status().message()),
                  "shard model-00001-of-00005.safetensors named by the index is missing from " +
                      dir + "; it holds tensor 'language_model.model.");
}

}  // namespace
}  // namespace k3::engined
