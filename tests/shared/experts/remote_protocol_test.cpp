// Both ends of the remote expert protocol (shared/experts/remote_protocol.h)
// without a network.
//
// The host's end (RemoteRequest): check_remote_request passes a valid
// request of each mode and makes it the engine's request; each malformed
// field is refused with the code the stream closes with and an error naming
// the field.
//
// engined's end (RemoteAnswers): what its remote source accepts from a host:
// a Describe answer and the replies of a layer step, in compute and in bytes
// mode; each malformed one is refused with an error naming the field.
#include "shared/experts/remote_protocol.h"

#include <gtest/gtest.h>

#include <cstring>
#include <vector>

#include "tests/test_util.h"

namespace k3::experts {

namespace {
namespace host_end {

namespace pb = k3serve::v1;

struct Host {
  RemoteHostView view;
  Host() {
    auto c = checkpoint::load_model_config(testing::tiny_model_dir());
    EXPECT_TRUE(c.ok()) << c.status();
    view.shape = ExpertShape::of(*c);
    view.fingerprint = "0123456789abcdef";
    view.kernel_isa = "scalar";
    // Even experts only, as a host owning half of a layer would.
    view.serves = [](int64_t, int64_t e) { return e % 2 == 0; };
  }
  size_t latent() const { return static_cast<size_t>(view.shape.latent); }
};

const Host& host() {
  static const Host h;
  return h;
}

// A compute request of `tokens` rows for experts 0 and 2 of layer 1.
pb::ExpertStreamRequest compute_request(bool int8, uint32_t tokens = 3) {
  const size_t lat = host().latent();
  pb::ExpertStreamRequest r;
  r.set_step(7);
  r.set_model_fingerprint(host().view.fingerprint);
  r.set_layer(1);
  r.set_mode(pb::EXPERT_MODE_COMPUTE);
  r.set_kernel_isa("scalar");
  r.set_int8(int8);
  r.set_tokens(tokens);
  if (int8) {
    std::string q(tokens * lat, '\0');
    for (size_t i = 0; i < q.size(); ++i) q[i] = static_cast<char>(i % 7);
    std::vector<float> s(tokens * lat / 32, 0.5f);
    r.set_q(q);
    r.set_q_scales(reinterpret_cast<const char*>(s.data()), s.size() * sizeof(float));
  } else {
    std::vector<float> f(tokens * lat, 0.25f);
    r.set_f32(reinterpret_cast<const char*>(f.data()), f.size() * sizeof(float));
  }
  pb::ExpertWorkItem* a = r.add_work();
  a->set_expert(0);
  a->add_rows(0);
  a->add_rows(2);
  pb::ExpertWorkItem* b = r.add_work();
  b->set_expert(2);
  b->add_rows(1);
  return r;
}

pb::ExpertStreamRequest bytes_request(pb::ExpertMode mode = pb::EXPERT_MODE_BYTES) {
  pb::ExpertStreamRequest r;
  r.set_step(3);
  r.set_model_fingerprint(host().view.fingerprint);
  r.set_layer(2);
  r.set_mode(mode);
  r.add_work()->set_expert(4);
  r.add_work()->set_expert(6);
  return r;
}

// The refusal of `r`: its code, and a message naming `field`.
void expect_refused(const pb::ExpertStreamRequest& r, absl::StatusCode code,
                    const std::string& field) {
  auto c = check_remote_request(r, host().view);
  ASSERT_FALSE(c.ok()) << "accepted; expected a refusal naming " << field;
  EXPECT_EQ(c.status().code(), code) << c.status();
  EXPECT_NE(msg(c.status()).find(field), std::string::npos)
      << "the error does not name " << field << ": " << c.status();
}

TEST(RemoteRequest, Int8ComputePassesWithAlignedCopies) {
  const pb::ExpertStreamRequest r = compute_request(true);
  auto c = check_remote_request(r, host().view);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->step, 7u);
  EXPECT_EQ(c->mode, pb::EXPERT_MODE_COMPUTE);
  const ExpertRequest e = c->request();
  EXPECT_EQ(e.layer, 1);
  EXPECT_EQ(e.priority, ExpertPriority::kDemand);
  ASSERT_EQ(e.work.size(), 2u);
  EXPECT_EQ(e.work[0].expert, 0);
  EXPECT_TRUE(e.work[0].compute);
  EXPECT_EQ(e.work[0].rows, (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(e.work[1].rows, (std::vector<int64_t>{1}));
  ASSERT_NE(e.activations, nullptr);
  EXPECT_TRUE(e.activations->int8);
  EXPECT_EQ(e.activations->tokens, 3);
  EXPECT_EQ(std::memcmp(e.activations->q, r.q().data(), r.q().size()), 0);
  EXPECT_EQ(e.activations->q_scales[0], 0.5f);
  EXPECT_EQ(reinterpret_cast<uintptr_t>(e.activations->q_scales) % alignof(float), 0u);
  // The engine's own check agrees: the request is computable as it stands.
  EXPECT_TRUE(check_request(e, host().view.shape.num_experts).ok());
}

TEST(RemoteRequest, FloatComputePasses) {
  auto c = check_remote_request(compute_request(false), host().view);
  ASSERT_TRUE(c.ok()) << c.status();
  const ExpertRequest e = c->request();
  ASSERT_NE(e.activations, nullptr);
  EXPECT_FALSE(e.activations->int8);
  EXPECT_EQ(e.activations->f32[3 * host().latent() - 1], 0.25f);
}

TEST(RemoteRequest, MovedRequestKeepsItsActivations) {
  auto c = check_remote_request(compute_request(true), host().view);
  ASSERT_TRUE(c.ok()) << c.status();
  CheckedRequest moved = std::move(*c);
  const ExpertRequest e = moved.request();
  EXPECT_EQ(e.activations, &moved.activations);
  EXPECT_EQ(e.activations->q, moved.q.data());
}

TEST(RemoteRequest, BytesAndPrefetchPass) {
  auto b = check_remote_request(bytes_request(), host().view);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(b->request().activations, nullptr);
  ASSERT_EQ(b->request().work.size(), 2u);
  EXPECT_FALSE(b->request().work[1].compute);
  auto p = check_remote_request(bytes_request(pb::EXPERT_MODE_PREFETCH), host().view);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->request().priority, ExpertPriority::kSpeculative);
}

TEST(RemoteRequest, RefusesAnotherModel) {
  auto r = compute_request(true);
  r.set_model_fingerprint("ffffffffffffffff");
  expect_refused(r, absl::StatusCode::kFailedPrecondition, "model_fingerprint");
  r.clear_model_fingerprint();
  expect_refused(r, absl::StatusCode::kFailedPrecondition, "(none named)");
}

TEST(RemoteRequest, RefusesADenseOrMissingLayer) {
  auto r = compute_request(true);
  r.set_layer(0);  // the tiny model's dense layer
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field layer");
  r.set_layer(static_cast<uint32_t>(host().view.shape.num_layers));
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field layer");
}

TEST(RemoteRequest, RefusesAnUnknownMode) {
  auto r = bytes_request();
  r.set_mode(pb::EXPERT_MODE_UNSPECIFIED);
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field mode");
  r.set_mode(static_cast<pb::ExpertMode>(42));
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field mode");
}

TEST(RemoteRequest, RefusesAnotherKernelVariant) {
  auto r = compute_request(true);
  r.set_kernel_isa("avx512");
  expect_refused(r, absl::StatusCode::kFailedPrecondition, "kernel variant mismatch");
  expect_refused(r, absl::StatusCode::kFailedPrecondition, "kernel_isa");
}

TEST(RemoteRequest, RefusesTokenCountsOutOfRange) {
  auto r = compute_request(true);
  r.set_tokens(0);
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field tokens");
  r.set_tokens(kMaxRemoteTokens + 1);
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field tokens");
}

TEST(RemoteRequest, RefusesActivationBytesThatDoNotMatchTokens) {
  auto r = compute_request(true);
  r.set_tokens(4);  // 3 rows of q sent
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field q:");
  r = compute_request(true);
  r.mutable_q()->push_back('\0');
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field q:");
  r = compute_request(true);
  r.mutable_q_scales()->resize(r.q_scales().size() - 4);
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field q_scales");
  r = compute_request(true);
  r.set_f32(std::string(16, '\0'));
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field f32");
  r = compute_request(false);
  r.mutable_f32()->resize(r.f32().size() - 1);
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field f32");
  r = compute_request(false);
  r.set_q("x");
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field q ");
  r = compute_request(false);
  r.set_q_scales("xxxx");
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field q_scales");
}

TEST(RemoteRequest, RefusesExpertsOutOfRangeTwiceOrNotServed) {
  auto r = compute_request(true);
  r.mutable_work(1)->set_expert(static_cast<uint32_t>(host().view.shape.num_experts));
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field work[1].expert");
  r = compute_request(true);
  r.mutable_work(1)->set_expert(0);
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field work[1].expert");
  expect_refused(r, absl::StatusCode::kInvalidArgument, "twice");
  r = compute_request(true);
  r.mutable_work(1)->set_expert(3);  // odd: not served by this host
  expect_refused(r, absl::StatusCode::kNotFound, "does not serve expert 3 of layer 1");
}

TEST(RemoteRequest, RefusesRowsOutsideTheActivationsOrTwice) {
  auto r = compute_request(true);
  r.mutable_work(0)->add_rows(3);  // 3 rows sent: 0..2
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field work[0].rows[2]");
  r = compute_request(true);
  r.mutable_work(1)->add_rows(1);
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field work[1].rows[1]");
  expect_refused(r, absl::StatusCode::kInvalidArgument, "given twice");
}

TEST(RemoteRequest, RefusesComputeFieldsOutsideComputeMode) {
  auto r = bytes_request();
  r.mutable_work(0)->add_rows(0);
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field work[0].rows");
  const auto base = bytes_request(pb::EXPERT_MODE_PREFETCH);
  r = base;
  r.set_kernel_isa("scalar");
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field kernel_isa");
  r = base;
  r.set_int8(true);
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field int8");
  r = base;
  r.set_tokens(1);
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field tokens");
  r = base;
  r.set_q("q");
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field q ");
  r = base;
  r.set_q_scales("abcd");
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field q_scales");
  r = bytes_request();
  r.set_f32("abcd");
  expect_refused(r, absl::StatusCode::kInvalidArgument, "field f32");
}

// The receive cap: the encoded request of a full chunk (every token sent,
// each routed to top-k experts, float activations) fits, with little room
// over it; a huge model's is clamped to what gRPC's int caps hold.
TEST(RemoteMessageCap, HoldsTheLargestChunkRequestAndLittleMore) {
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  ASSERT_TRUE(c.ok()) << c.status();
  const ExpertShape& shape = host().view.shape;
  const int64_t T = kMaxChunkTokens, K = c->num_experts_per_token, lat = shape.latent;
  std::vector<float> f32(static_cast<size_t>(T * lat), 1.5f);
  ExpertActivations act;
  act.tokens = T;
  act.int8 = false;
  act.f32 = f32.data();
  ExpertRequest r;
  r.layer = 1;
  r.activations = &act;
  for (int64_t e = 0; e < shape.num_experts; ++e) {
    ExpertWork w;
    w.expert = e;
    w.compute = true;
    for (int64_t t = 0; t < T; ++t)
      if ((t + e) % shape.num_experts < K) w.rows.push_back(t);  // K experts per token
    r.work.push_back(std::move(w));
  }
  EXPECT_EQ(step_request_tokens(r), T);  // the most a host receives
  const pb::ExpertStreamRequest req =
      encode_step_request(shape, r, ~0ull, std::string(64, 'f'), false, "avx512");
  const uint64_t cap = max_remote_message_bytes(shape, K);
  EXPECT_GE(cap, req.ByteSizeLong() + 5);
  EXPECT_LE(cap, (req.ByteSizeLong() + 5) * 11 / 10 + (64u << 10));
  // The largest compute reply: one expert's rows for every token of the
  // chunk (more than top-k routing gives it), float.
  pb::ExpertStreamReply reply;
  reply.set_step(~0ull);
  reply.set_index(static_cast<uint32_t>(shape.num_experts - 1));
  reply.set_rows(std::string(static_cast<size_t>(T * lat) * sizeof(float), '\x7f'));
  EXPECT_GE(cap, reply.ByteSizeLong() + 5);
  // The same chunk with int8 activations is smaller still.
  std::vector<int8_t> q(static_cast<size_t>(T * lat), -3);
  std::vector<float> qs(static_cast<size_t>(T * lat / 32), 0.25f);
  act.int8 = true;
  act.f32 = nullptr;
  act.q = q.data();
  act.q_scales = qs.data();
  EXPECT_GE(
      cap,
      encode_step_request(shape, r, ~0ull, std::string(64, 'f'), false, "avx512").ByteSizeLong() +
          5);
  // The real model's (3072 latent, 896 experts, top-16): 50.7 MB, within
  // gRPC's int caps and engined's 512 MiB receive cap for the replies.
  ExpertShape real = shape;
  real.latent = 3072;
  real.intermediate = 3584;
  real.num_experts = 896;
  EXPECT_EQ(max_remote_message_bytes(real, 16),
            4096ull * 3072 * 4 + 4096ull * 16 * 5 + 896ull * 18 + 1024);
  EXPECT_LT(max_remote_message_bytes(real, 16), 512ull << 20);
  ExpertShape huge = shape;
  huge.latent = 1 << 20;
  EXPECT_EQ(max_remote_message_bytes(huge, K), static_cast<uint64_t>(INT32_MAX));
}

}  // namespace host_end
}  // namespace

namespace {
namespace engine_end {

namespace pb = k3serve::v1;

const ExpertShape& shape() {
  static const ExpertShape s = [] {
    auto c = checkpoint::load_model_config(testing::tiny_model_dir());
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

// The tokens a compute step carries: its distinct rows, however many of its
// experts each one chose; none for work that computes nothing.
TEST(RemoteAnswers, AStepCarriesItsDistinctTokenRows) {
  ExpertRequest r;
  EXPECT_EQ(step_request_tokens(r), 0);
  r.work.push_back({0, false, {}});
  EXPECT_EQ(step_request_tokens(r), 0);
  r.work.push_back({1, true, {0, 5, 9}});
  r.work.push_back({2, true, {5, 9, 12}});
  EXPECT_EQ(step_request_tokens(r), 4);  // 0, 5, 9, 12; rows 1-4 etc. not sent
  // One past what a host receives: the engine sends such a step as bytes.
  ExpertRequest big;
  for (int64_t e = 0; e < 3; ++e) {
    ExpertWork w;
    w.expert = e;
    w.compute = true;
    for (int64_t t = e; t <= kMaxChunkTokens; t += 3) w.rows.push_back(t);
    big.work.push_back(std::move(w));
  }
  EXPECT_EQ(step_request_tokens(big), kMaxChunkTokens + 1);
}

TEST(RemoteAnswers, DescribeGivesTheBitmapPerLayer) {
  auto o = check_describe(describe(), shape(), kFp, "h (x:1)");
  ASSERT_TRUE(o.ok()) << o.status();
  ASSERT_EQ(o->size(), static_cast<size_t>(shape().num_layers));
  EXPECT_TRUE((*o)[1].empty());
  ASSERT_FALSE((*o)[2].empty());
  EXPECT_EQ((*o)[2][0], 0x05);
}

TEST(RemoteAnswers, DescribeRefusals) {
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

TEST(RemoteAnswers, ComputeRepliesCompleteTheirExperts) {
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

// Work with no rows (the fuzzer's input): its reply holds none, and nothing
// is copied (memcpy of 0 bytes into an empty vector's null data() was UB).
TEST(RemoteAnswers, AComputeReplyOfNoRows) {
  RemoteStepReplies s;
  std::vector<ExpertWork> work(1);
  work[0].expert = 3;
  work[0].compute = true;
  s.start(shape(), work, false);
  auto a = s.take(rows_reply(0, 0, 1.0f));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(a->has_value());
  EXPECT_TRUE((*a)->rows.empty());
  EXPECT_EQ(s.left(), 0u);
}

TEST(RemoteAnswers, ComputeRefusals) {
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

TEST(RemoteAnswers, BytesChunksAssembleInOrder) {
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

TEST(RemoteAnswers, BytesRefusals) {
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

}  // namespace engine_end
}  // namespace
}  // namespace k3::experts
