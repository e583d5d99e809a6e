// Two sequence groups offset by half a layer (EngineOptions::sequence_groups,
// issue 11 item 1b): a batch's logits are bit-identical to one group and to
// each sequence alone, and the source sees each MoE layer's request twice,
// once per group, A's before B's, one demand request in flight at a time.
#include <gtest/gtest.h>

#include <cstring>

#include "engined/experts/source_factory.h"
#include "engined/model/model.h"
#include "tests/engined/experts/forwarding_source.h"
#include "tests/test_util.h"

namespace k3::engined {
namespace {

// Forwards to a real source and records each demand request's layer and
// rows, and whether one was posted while another still had completions due.
class RecordingSource : public ForwardingSource {
 public:
  using ForwardingSource::ForwardingSource;
  Status submit(const experts::ExpertRequest& r) override {
    if (r.priority == experts::ExpertPriority::kDemand) {
      if (inner().outstanding() > 0) overlapped_ = true;
      int64_t rows = 0;
      for (const experts::ExpertWork& w : r.work) rows += static_cast<int64_t>(w.rows.size());
      layers_.push_back(r.layer);
      rows_.push_back(rows);
    }
    return ForwardingSource::submit(r);
  }

  std::vector<int64_t> layers_, rows_;
  bool overlapped_ = false;
};

struct Passes {
  std::vector<std::vector<float>> logits;  // per pass
  std::vector<std::vector<int64_t>> layers, rows;
  bool overlapped = false;
};

// Three sequences: prefills of 6, 3 and 1 tokens in one pass, then three
// decode passes of all three.
Passes run(int groups) {
  EngineOptions opt;
  opt.sequence_groups = groups;
  opt.speculation = SpeculationMode::kOff;
  auto m = Model::load(testing::tiny_model_dir(), {}, opt);
  EXPECT_TRUE(m.ok()) << m.status();
  auto inner = make_expert_source({}, **m);
  EXPECT_TRUE(inner.ok()) << inner.status();
  RecordingSource src(std::move(*inner));
  std::vector<std::unique_ptr<SequenceState>> seqs;
  for (int i = 0; i < 3; ++i) seqs.push_back((*m)->new_sequence());
  std::vector<std::vector<int32_t>> first = {{5, 9, 13, 200, 31, 7}, {44, 45, 46}, {101}};
  Passes out;
  for (int pass = 0; pass < 4; ++pass) {
    std::vector<Model::Piece> pieces;
    for (int i = 0; i < 3; ++i)
      pieces.push_back(
          {seqs[i].get(),
           pass == 0 ? first[i] : std::vector<int32_t>{static_cast<int32_t>(60 + 7 * pass + i)},
           true});
    src.layers_.clear();
    src.rows_.clear();
    std::vector<float> logits;
    Status s = (*m)->forward_batch(src, pieces, &logits);
    EXPECT_TRUE(s.ok()) << s;
    out.logits.push_back(logits);
    out.layers.push_back(src.layers_);
    out.rows.push_back(src.rows_);
  }
  out.overlapped = src.overlapped_;
  return out;
}

TEST(SequenceGroups, TwoGroupsGiveOneGroupsLogitsBitForBit) {
  const Passes one = run(1), two = run(2);
  ASSERT_EQ(one.logits.size(), two.logits.size());
  for (size_t p = 0; p < one.logits.size(); ++p) {
    ASSERT_EQ(one.logits[p].size(), two.logits[p].size());
    EXPECT_EQ(std::memcmp(one.logits[p].data(), two.logits[p].data(),
                          one.logits[p].size() * sizeof(float)),
              0)
        << "pass " << p;
  }
  EXPECT_FALSE(two.overlapped) << "a demand request went out while another had completions due";

  // One request per MoE layer step with one group; two (A's, then B's) with two.
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  ASSERT_TRUE(c.ok());
  std::vector<int64_t> moe_layers;
  for (int64_t l = 0; l < c->num_hidden_layers; ++l)
    if (l >= c->first_k_dense_replace) moe_layers.push_back(l);
  ASSERT_FALSE(moe_layers.empty());
  for (size_t p = 0; p < one.layers.size(); ++p) {
    EXPECT_EQ(one.layers[p], moe_layers) << "pass " << p;
    std::vector<int64_t> twice;
    for (int64_t l : moe_layers) twice.insert(twice.end(), {l, l});
    EXPECT_EQ(two.layers[p], twice) << "pass " << p;
    // Together the two groups route every row of the pass, as the one does.
    for (size_t k = 0; k < moe_layers.size(); ++k)
      EXPECT_EQ(two.rows[p][2 * k] + two.rows[p][2 * k + 1], one.rows[p][k]) << "pass " << p;
  }
  // Prefill pass: 10 rows, split 6 | 4 (whole pieces, about half each).
  const int64_t K = c->num_experts_per_token;
  EXPECT_EQ(two.rows[0][0], 6 * K);
  EXPECT_EQ(two.rows[0][1], 4 * K);
}

TEST(SequenceGroups, EachSequenceGetsWhatItGetsAlone) {
  const Passes two = run(2);
  EngineOptions opt;
  auto m = Model::load(testing::tiny_model_dir(), {}, opt);
  ASSERT_TRUE(m.ok());
  auto src = make_expert_source({}, **m);
  ASSERT_TRUE(src.ok());
  const int64_t V = (*m)->config().vocab_size;
  std::vector<std::vector<int32_t>> first = {{5, 9, 13, 200, 31, 7}, {44, 45, 46}, {101}};
  for (int i = 0; i < 3; ++i) {
    auto seq = (*m)->new_sequence();
    for (int pass = 0; pass < 4; ++pass) {
      std::vector<float> logits;
      const std::vector<int32_t> ids =
          pass == 0 ? first[i] : std::vector<int32_t>{static_cast<int32_t>(60 + 7 * pass + i)};
      ASSERT_TRUE((*m)->forward(**src, *seq, ids, 1, &logits).ok());
      EXPECT_EQ(std::memcmp(logits.data(), two.logits[pass].data() + i * V, V * sizeof(float)), 0)
          << "sequence " << i << " pass " << pass;
    }
  }
}

}  // namespace
}  // namespace k3::engined
