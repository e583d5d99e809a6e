// What engined's remote source accepts from a host (engined/experts/
// remote_wire.h), without a network: a host's Describe answer and the
// replies of a layer step, in compute and in bytes mode; each malformed one
// is refused with an error naming the field.
#include "engined/experts/remote_wire.h"

#include <gtest/gtest.h>

#include <cstring>

#include "tests/test_util.h"

namespace k3::engine {
namespace {

namespace pb = k3serve::v1;

const ExpertShape& shape() {
  static const ExpertShape s = [] {
    auto c = load_model_config(testing::tiny_model_dir());
    EXPECT_TRUE(c.ok()) << c.status();
    return ExpertShape::of(*c);
  }();
  return s;
}

const std::string kFp = "00000000deadbeef";

pb::DescribeResponse describe() {
  pb::DescribeResponse d;
  d.set_model_fingerprint(kFp);
  d.set_expert_bytes(shape().bytes);
  pb::ServedLayer* l = d.add_layers();
  l->set_layer(2);
  std::string bits(static_cast<size_t>((shape().num_experts + 7) / 8), '\0');
  bits[0] = 0x05;  // experts 0 and 2
  l->set_experts(bits);
  l->set_expert_count(2);
  return d;
}

void expect_describe_refused(const pb::DescribeResponse& d, const std::string& field) {
  auto o = check_describe(d, shape(), kFp, "h (x:1)");
  ASSERT_FALSE(o.ok()) << "accepted; expected a refusal naming " << field;
  EXPECT_EQ(o.status().code(), absl::StatusCode::kFailedPrecondition) << o.status();
  EXPECT_NE(msg(o.status()).find(field), std::string::npos) << o.status();
  EXPECT_NE(msg(o.status()).find("h (x:1)"), std::string::npos) << o.status();
}

TEST(RemoteWire, DescribeGivesTheBitmapPerLayer) {
  auto o = check_describe(describe(), shape(), kFp, "h (x:1)");
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->size(), static_cast<size_t>(shape().num_layers));
  EXPECT_TRUE((*o)[1].empty());
  ASSERT_FALSE((*o)[2].empty());
  EXPECT_EQ((*o)[2][0], 0x05);
}

TEST(RemoteWire, DescribeRefusals) {
  auto d = describe();
  d.set_model_fingerprint("1111111111111111");
  expect_describe_refused(d, "serves another model");
  d = describe();
  d.set_expert_bytes(shape().bytes + 1);
  expect_describe_refused(d, "bytes, not");
  d = describe();
  d.mutable_layers(0)->set_layer(0);  // dense
  expect_describe_refused(d, "layers[0].layer");
  d = describe();
  d.mutable_layers(0)->set_layer(static_cast<uint32_t>(shape().num_layers));
  expect_describe_refused(d, "layers[0].layer");
  d = describe();
  d.mutable_layers(0)->mutable_experts()->push_back('\0');
  expect_describe_refused(d, "layers[0].experts");
  d = describe();
  *d.add_layers() = d.layers(0);
  expect_describe_refused(d, "layers[1]");
  d = describe();
  d.mutable_layers(0)->set_expert_count(3);
  expect_describe_refused(d, "layers[0].expert_count");
}

std::vector<ExpertWork> compute_work() {
  return {{4, true, {0, 1}}, {6, true, {1}}};
}

pb::ExpertStreamReply rows_reply(uint32_t index, size_t rows, float v) {
  pb::ExpertStreamReply r;
  r.set_step(1);
  r.set_index(index);
  std::vector<float> f(rows * static_cast<size_t>(shape().latent), v);
  r.set_rows(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(float));
  return r;
}

void expect_refused(RemoteStepReplies& s, const pb::ExpertStreamReply& r,
                    const std::string& field) {
  auto t = s.take(r);
  ASSERT_FALSE(t.ok()) << "accepted; expected a refusal naming " << field;
  EXPECT_EQ(t.status().code(), absl::StatusCode::kDataLoss) << t.status();
  EXPECT_NE(msg(t.status()).find(field), std::string::npos) << t.status();
}

TEST(RemoteWire, ComputeRepliesCompleteTheirExperts) {
  RemoteStepReplies s;
  s.start(shape(), compute_work(), false);
  EXPECT_EQ(s.left(), 2u);
  auto b = s.take(rows_reply(1, 1, 2.0f));
  ASSERT_TRUE(b.ok()) << b.status();
  ASSERT_TRUE(b->has_value());
  EXPECT_EQ((*b)->index, 1u);
  EXPECT_EQ((*b)->rows.size(), static_cast<size_t>(shape().latent));
  EXPECT_EQ((*b)->rows[0], 2.0f);
  auto a = s.take(rows_reply(0, 2, 1.0f));
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ((*a)->rows.size(), 2 * static_cast<size_t>(shape().latent));
  EXPECT_EQ(s.left(), 0u);
}

TEST(RemoteWire, ComputeRefusals) {
  RemoteStepReplies s;
  s.start(shape(), compute_work(), false);
  expect_refused(s, rows_reply(2, 1, 0), "field index");
  expect_refused(s, rows_reply(1, 2, 0), "field rows");
  auto r = rows_reply(1, 1, 0);
  r.set_data("x");
  expect_refused(s, r, "bytes-mode fields");
  ASSERT_TRUE(s.take(rows_reply(1, 1, 0)).ok());
  expect_refused(s, rows_reply(1, 1, 0), "not due");  // answered twice
  EXPECT_EQ(s.left(), 1u);
}

pb::ExpertStreamReply chunk(uint32_t index, uint64_t offset, uint64_t len, char v = 'a') {
  pb::ExpertStreamReply r;
  r.set_step(1);
  r.set_index(index);
  r.set_offset(offset);
  r.set_total_bytes(shape().bytes);
  r.set_data(std::string(len, v));
  return r;
}

TEST(RemoteWire, BytesChunksAssembleInOrder) {
  RemoteStepReplies s;
  s.start(shape(), {{4, false, {}}}, true);
  const uint64_t half = shape().bytes / 2;
  auto first = s.take(chunk(0, 0, half, 'a'));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_FALSE(first->has_value());
  auto last = s.take(chunk(0, half, shape().bytes - half, 'b'));
  ASSERT_TRUE(last.ok()) << last.status();
  ASSERT_TRUE(last->has_value());
  ASSERT_EQ((*last)->bytes.size(), shape().bytes);
  EXPECT_EQ((*last)->bytes[0], 'a');
  EXPECT_EQ((*last)->bytes.back(), 'b');
  EXPECT_EQ(s.left(), 0u);
}

TEST(RemoteWire, BytesRefusals) {
  RemoteStepReplies s;
  s.start(shape(), {{4, false, {}}}, true);
  expect_refused(s, chunk(0, 8, 8), "does not follow");  // a gap
  expect_refused(s, chunk(0, 0, shape().bytes + 1), "does not follow");
  expect_refused(s, chunk(0, 0, 0), "does not follow");  // empty
  auto wrong_total = chunk(0, 0, 8);
  wrong_total.set_total_bytes(shape().bytes - 1);
  expect_refused(s, wrong_total, "total_bytes");
  auto with_rows = chunk(0, 0, 8);
  with_rows.set_rows("abcd");
  expect_refused(s, with_rows, "field rows");
  ASSERT_TRUE(s.take(chunk(0, 0, 8)).ok());
  expect_refused(s, chunk(0, 0, 8), "does not follow");  // repeated
}

}  // namespace
}  // namespace k3::engine
