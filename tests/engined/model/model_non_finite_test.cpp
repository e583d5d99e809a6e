// Never NaN as an answer: a forward pass whose hidden state goes non-finite
// fails with DATA_LOSS naming the layer; in a batch only the piece whose rows
// went bad fails, and the others give exactly what they give alone.
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>

#include "engined/experts/source_factory.h"
#include "engined/model/model.h"
#include "shared/base/file.h"
#include "shared/checkpoint/checkpoint.h"
#include "tests/test_util.h"

namespace k3::engined {
namespace {

namespace fs = std::filesystem;

// A copy of the tiny model whose embedding row `id` is NaN (BF16 0x7FC0).
std::string model_with_nan_row(const testing::TempDir& tmp, int32_t id) {
  const std::string dir = tmp.file("model");
  fs::copy(testing::tiny_model_dir(), dir, fs::copy_options::recursive);
  auto ck = checkpoint::Checkpoint::open(dir);
  const checkpoint::TensorInfo* t = (*ck)->find("model.embed_tokens.weight");
  EXPECT_NE(t, nullptr);
  EXPECT_EQ(t->dtype, checkpoint::DType::kBF16);
  const int64_t D = t->shape[1];
  std::vector<uint16_t> row(static_cast<size_t>(D), 0x7FC0);
  base::File f = *base::File::open_write((*ck)->files()[t->file]);
  EXPECT_TRUE(f.pwrite_all(row.data(), row.size() * 2, t->offset + id * D * 2).ok());
  return dir;
}

TEST(NonFinite, AForwardPassThatGoesNanFailsNamingTheLayer) {
  testing::TempDir tmp;
  const int32_t bad = 77;
  const std::string dir = model_with_nan_row(tmp, bad);
  auto m = Model::load(dir, {}, EngineOptions{});
  ASSERT_TRUE(m.ok()) << m.status();
  auto x = make_expert_source({}, **m);
  ASSERT_TRUE(x.ok());
  auto seq = (*m)->new_sequence();
  std::vector<float> logits;
  Status s = (*m)->forward(**x, *seq, {5, bad, 9}, 1, &logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << s;
  EXPECT_NE(msg(s).find("non-finite hidden state after layer 0"), std::string::npos) << s;
  EXPECT_FALSE(seq->valid);
  // The engined score command: exit non-zero, no logits file passed off as good.
  auto r = testing::run_command({testing::bin_dir() + "/engined", "score", "--model", dir, "--ids",
                                 "5,77,9", "--out", tmp.file("l.f32")});
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.err.find("non-finite hidden state"), std::string::npos) << r.err;
}

TEST(NonFinite, InABatchOnlyThePieceThatWentBadFails) {
  testing::TempDir tmp;
  const int32_t bad = 77;
  const std::string dir = model_with_nan_row(tmp, bad);
  auto m = Model::load(dir, {}, EngineOptions{});
  ASSERT_TRUE(m.ok());
  auto x = make_expert_source({}, **m);
  ASSERT_TRUE(x.ok());
  const std::vector<int32_t> good_ids = {5, 6, 7, 8}, bad_ids = {9, bad, 10};
  // The good piece alone.
  auto alone = (*m)->new_sequence();
  std::vector<float> want;
  ASSERT_TRUE((*m)->forward(**x, *alone, good_ids, 1, &want).ok());
  // Both in one batch, the bad one first (its logits row comes first).
  auto a = (*m)->new_sequence(), b = (*m)->new_sequence();
  std::vector<Model::Piece> pieces = {{b.get(), bad_ids, true}, {a.get(), good_ids, true}};
  std::vector<float> logits;
  std::vector<Status> per_piece;
  ASSERT_TRUE((*m)->forward_batch(**x, pieces, &logits, nullptr, &per_piece).ok());
  ASSERT_EQ(per_piece.size(), 2u);
  EXPECT_EQ(per_piece[0].code(), absl::StatusCode::kDataLoss) << per_piece[0];
  EXPECT_TRUE(per_piece[1].ok()) << per_piece[1];
  EXPECT_FALSE(b->valid);
  EXPECT_TRUE(a->valid);
  const int64_t V = (*m)->config().vocab_size;
  ASSERT_EQ(logits.size(), static_cast<size_t>(2 * V));
  EXPECT_EQ(std::memcmp(logits.data() + V, want.data(), V * sizeof(float)), 0);
  // Without per-piece statuses the batch fails as a whole.
  auto c = (*m)->new_sequence(), d = (*m)->new_sequence();
  Status s =
      (*m)->forward_batch(**x, {{c.get(), bad_ids, true}, {d.get(), good_ids, true}}, &logits);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_FALSE(d->valid);
}

}  // namespace
}  // namespace k3::engined
