// The asynchronous expert interface over the in-process source (real shard
// files, real loader threads): bytes and computed rows, request checks,
// replacing a request in flight, speculative reads, and a placement.
#include "shared/experts/expert_source.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "engined/experts/pread_source.h"
#include "engined/experts/routing_source.h"
#include "shared/kernels/mxfp4.h"
#include "tests/engine/forwarding_source.h"
#include "tests/test_util.h"

namespace k3::engine {

using k3::experts::compute_expert_rows;
using k3::experts::ExpertActivations;
using k3::experts::ExpertPriority;
using k3::experts::ExpertRequest;
using k3::experts::ExpertShape;
using k3::experts::ExpertSource;
using k3::experts::ExpertSourceStats;
using k3::experts::ExpertWork;
using k3::experts::fetch_bytes;
namespace {

struct Fixture {
  ModelConfig config;
  std::unique_ptr<Checkpoint> ck;
  std::unique_ptr<ExpertIndex> index;
  ExpertShape shape;

  Fixture() {
    auto c = load_model_config(testing::tiny_model_dir());
    EXPECT_TRUE(c.ok()) << c.status();
    config = *c;
    auto k = Checkpoint::open(testing::tiny_model_dir());
    EXPECT_TRUE(k.ok()) << k.status();
    ck = std::move(*k);
    auto ix = ExpertIndex::build(*ck, config);
    EXPECT_TRUE(ix.ok()) << ix.status();
    index = std::make_unique<ExpertIndex>(std::move(*ix));
    shape = ExpertShape::of(config);
  }
  std::unique_ptr<PreadExpertSource> source(uint64_t cache_bytes = 1ull << 30, int threads = 2) {
    PreadSourceOptions o;
    o.cache_bytes = cache_bytes;
    o.threads = threads;
    o.direct = false;
    auto s = PreadExpertSource::create(*ck, *index, shape, o);
    EXPECT_TRUE(s.ok()) << s.status();
    return std::move(*s);
  }
  // The expert's bytes straight from its shard file.
  std::vector<uint8_t> file_bytes(int64_t layer, int64_t expert) const {
    const ExpertLocation& loc = index->at(layer, expert);
    std::vector<uint8_t> b(index->expert_bytes());
    EXPECT_TRUE(ck->file(loc.file).pread_exact(b.data(), b.size(), loc.offset).ok());
    return b;
  }
};

// Latent activations of a few tokens, both kernels' forms.
struct Acts {
  std::vector<float> f32;
  std::vector<int8_t> q;
  std::vector<float> qs;
  ExpertActivations act;
  Acts(int64_t tokens, int64_t lat, bool int8)
      : f32(tokens * lat), q(tokens * lat), qs(tokens * lat / 32) {
    for (size_t i = 0; i < f32.size(); ++i) f32[i] = std::sin(0.37f * static_cast<float>(i)) * 2;
    for (int64_t t = 0; t < tokens; ++t)
      kernels::quantize_q8_32(f32.data() + t * lat, lat, q.data() + t * lat,
                              qs.data() + t * lat / 32);
    act.tokens = tokens;
    act.int8 = int8;
    act.f32 = f32.data();
    act.q = q.data();
    act.q_scales = qs.data();
  }
};

TEST(ExpertSource, DeliversEachExpertsBytesOnce) {
  Fixture f;
  auto src = f.source();
  const int64_t layer = f.config.first_k_dense_replace;
  std::vector<int64_t> ids = {5, 0, 3};
  std::vector<int> seen(ids.size(), 0);
  ASSERT_TRUE(fetch_bytes(*src, layer, ids, [&](size_t i, const uint8_t* b) {
                const auto want = f.file_bytes(layer, ids[i]);
                EXPECT_EQ(std::memcmp(b, want.data(), want.size()), 0) << "expert " << ids[i];
                ++seen[i];
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(seen, std::vector<int>({1, 1, 1}));
  EXPECT_EQ(src->outstanding(), 0u);
  EXPECT_EQ(src->next().status().code(), absl::StatusCode::kFailedPrecondition);
  const ExpertSourceStats st = src->stats();
  EXPECT_EQ(st.requests, 3u);
  EXPECT_EQ(st.reads, 3u);
  EXPECT_EQ(st.bytes_read, 3 * f.index->expert_bytes());
  // Again: all resident.
  ASSERT_TRUE(
      fetch_bytes(*src, layer, ids, [](size_t, const uint8_t*) { return absl::OkStatus(); }).ok());
  EXPECT_EQ(src->stats().hits, 3u);
  EXPECT_EQ(src->stats().reads, 3u);
}

// "Compute these rows" through the source gives exactly the rows computed on
// the delivered bytes with the same kernels, for both kernels.
TEST(ExpertSource, ComputedRowsEqualRowsComputedOnTheBytes) {
  Fixture f;
  const int64_t layer = f.config.first_k_dense_replace;
  const int64_t lat = f.shape.latent;
  for (bool int8 : {true, false}) {
    auto src = f.source(/*cache_bytes=*/1, /*threads=*/1);  // two slots: reads overlap compute
    Acts a(5, lat, int8);
    ExpertRequest r;
    r.layer = layer;
    r.activations = &a.act;
    r.work = {{7, true, {0, 3, 4}}, {2, true, {1}}, {4, true, {2, 0}}, {1, false, {}}};
    ASSERT_TRUE(src->submit(r).ok());
    std::vector<int> seen(r.work.size(), 0);
    for (size_t n = 0; n < r.work.size(); ++n) {
      auto c = src->next();
      ASSERT_TRUE(c.ok()) << c.status();
      ++seen[c->index];
      const ExpertWork& w = r.work[c->index];
      const auto bytes = f.file_bytes(layer, w.expert);
      if (!w.compute) {
        EXPECT_EQ(std::memcmp(c->bytes, bytes.data(), bytes.size()), 0);
        EXPECT_TRUE(c->rows.empty());
        continue;
      }
      ASSERT_EQ(c->rows.size(), w.rows.size() * lat);
      std::vector<float> want(w.rows.size() * lat);
      compute_expert_rows(f.shape, bytes.data(), a.act, w.rows, want.data());
      EXPECT_EQ(std::memcmp(c->rows.data(), want.data(), want.size() * 4), 0)
          << "expert " << w.expert << " int8 " << int8;
    }
    EXPECT_EQ(seen, std::vector<int>({1, 1, 1, 1}));
    EXPECT_GT(src->stats().compute_seconds, 0.0);
  }
}

TEST(ExpertSource, RefusesBadRequests) {
  Fixture f;
  auto src = f.source();
  const int64_t layer = f.config.first_k_dense_replace;
  Acts a(2, f.shape.latent, true);
  auto code = [&](ExpertRequest r) { return src->submit(r).code(); };
  ExpertRequest r;
  r.layer = layer;
  r.work = {{1, false, {}}, {1, false, {}}};
  EXPECT_EQ(code(r), absl::StatusCode::kInvalidArgument) << "twice";
  r.work = {{f.config.num_experts, false, {}}};
  EXPECT_EQ(code(r), absl::StatusCode::kInvalidArgument) << "out of range";
  r.work = {{1, true, {0}}};
  EXPECT_EQ(code(r), absl::StatusCode::kInvalidArgument) << "compute without activations";
  r.activations = &a.act;
  r.work = {{1, true, {2}}};
  EXPECT_EQ(code(r), absl::StatusCode::kInvalidArgument) << "row outside the activations";
  r.work = {{1, true, {1}}};
  r.priority = ExpertPriority::kSpeculative;
  EXPECT_EQ(code(r), absl::StatusCode::kInvalidArgument) << "speculative compute";
  r.priority = ExpertPriority::kDemand;
  r.layer = 0;  // a dense layer
  if (f.config.first_k_dense_replace > 0) {
    EXPECT_EQ(code(r), absl::StatusCode::kNotFound);
  }
  r.layer = layer;
  EXPECT_TRUE(src->submit(r).ok());
  EXPECT_TRUE(src->next().ok());
}

// A new demand request replaces the one in flight: only its completions come.
TEST(ExpertSource, ANewRequestReplacesTheOneInFlight) {
  Fixture f;
  auto src = f.source(/*cache_bytes=*/1, /*threads=*/1);
  const int64_t layer = f.config.first_k_dense_replace;
  ExpertRequest a;
  a.layer = layer;
  for (int64_t e = 0; e < 6; ++e) a.work.push_back({e, false, {}});
  ASSERT_TRUE(src->submit(a).ok());
  ASSERT_TRUE(src->next().ok());
  ExpertRequest b;
  b.layer = layer + 1 < f.config.num_hidden_layers ? layer + 1 : layer;
  b.work = {{3, false, {}}, {6, false, {}}};
  ASSERT_TRUE(src->submit(b).ok());
  EXPECT_EQ(src->outstanding(), 2u);
  for (int n = 0; n < 2; ++n) {
    auto c = src->next();
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_LT(c->index, 2u);
    const auto want = f.file_bytes(b.layer, b.work[c->index].expert);
    EXPECT_EQ(std::memcmp(c->bytes, want.data(), want.size()), 0);
  }
  EXPECT_EQ(src->outstanding(), 0u);
}

// Speculative reads land in the cache without completing; the demand
// request that follows finds them resident.
TEST(ExpertSource, SpeculativeReadsWarmTheCache) {
  Fixture f;
  auto src = f.source();
  const int64_t layer = f.config.first_k_dense_replace;
  ExpertRequest spec;
  spec.layer = layer;
  spec.priority = ExpertPriority::kSpeculative;
  spec.work = {{2, false, {}}, {9, false, {}}};  // kSpeculativeInFlight of them
  ASSERT_TRUE(src->submit(spec).ok());
  EXPECT_EQ(src->outstanding(), 0u) << "speculative requests never complete";
  EXPECT_EQ(src->stats().speculative, 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // tiny reads: long done
  ASSERT_TRUE(fetch_bytes(*src, layer, {2, 9}, [](size_t, const uint8_t*) {
                return absl::OkStatus();
              }).ok());
  const ExpertSourceStats st = src->stats();
  EXPECT_EQ(st.requests, 2u);
  EXPECT_EQ(st.hits, 2u);
  EXPECT_EQ(st.reads, 0u) << "speculative reads are not counted as demand reads";
}

TEST(ExpertSource, PlacementRoutesToTheFirstOwnerAndSumsStats) {
  Fixture f;
  std::vector<std::unique_ptr<ExpertSource>> subs;
  subs.push_back(f.source());
  subs.push_back(f.source());
  auto p = RoutingSource::create(std::move(subs));
  ASSERT_TRUE(p.ok()) << p.status();
  const int64_t layer = f.config.first_k_dense_replace;
  Acts a(3, f.shape.latent, true);
  ExpertRequest r;
  r.layer = layer;
  r.activations = &a.act;
  r.work = {{4, true, {0, 2}}, {1, false, {}}};
  ASSERT_TRUE((*p)->submit(r).ok());
  EXPECT_EQ((*p)->outstanding(), 2u);
  std::vector<int> seen(2, 0);
  for (int n = 0; n < 2; ++n) {
    auto c = (*p)->next();
    ASSERT_TRUE(c.ok()) << c.status();
    ++seen[c->index];
    if (c->index == 0) {
      std::vector<float> want(2 * f.shape.latent);
      compute_expert_rows(f.shape, f.file_bytes(layer, 4).data(), a.act, {0, 2}, want.data());
      EXPECT_EQ(std::memcmp(c->rows.data(), want.data(), want.size() * 4), 0);
    }
  }
  EXPECT_EQ(seen, std::vector<int>({1, 1}));
  EXPECT_EQ((*p)->stats().requests, 2u);
  EXPECT_EQ((*p)->stats().reads, 2u);
  EXPECT_EQ(RoutingSource::create({}).status().code(), absl::StatusCode::kInvalidArgument);
}

// A source marked remote (the placement balances remote owners), over an
// in-process one, that records the experts each request gave it.
class RemoteLike final : public ForwardingSource {
 public:
  using ForwardingSource::ForwardingSource;
  Status submit(const ExpertRequest& r) override {
    std::vector<int64_t> e;
    for (const ExpertWork& w : r.work) e.push_back(w.expert);
    asked.push_back(e);
    return ForwardingSource::submit(r);
  }
  bool remote() const override { return true; }
  std::vector<std::vector<int64_t>> asked;  // per request, its experts
};

// Two replica hosts: a layer's experts are split evenly; the same layer's
// next request (the second sequence group of the step) sends an expert the
// first sent to a host to that host again (it was just read there) and
// balances only the new ones; a request for another layer balances afresh.
TEST(ExpertSource, PlacementBalancesReplicasAndKeepsAStepsExpertsWhereTheyWereRead) {
  Fixture f;
  std::vector<std::unique_ptr<ExpertSource>> subs;
  std::vector<RemoteLike*> host;
  for (int i = 0; i < 2; ++i) {
    auto h = std::make_unique<RemoteLike>(f.source());
    host.push_back(h.get());
    subs.push_back(std::move(h));
  }
  auto p = RoutingSource::create(std::move(subs));
  ASSERT_TRUE(p.ok()) << p.status();
  const int64_t layer = f.config.first_k_dense_replace;
  ASSERT_GE(f.config.num_experts, 6);
  Acts a(1, f.shape.latent, true);
  auto run = [&](int64_t l, const std::vector<int64_t>& experts) {
    ExpertRequest r;
    r.layer = l;
    r.activations = &a.act;
    for (int64_t e : experts) r.work.push_back({e, true, {0}});
    ASSERT_TRUE((*p)->submit(r).ok());
    for (size_t n = 0; n < experts.size(); ++n) ASSERT_TRUE((*p)->next().ok());
  };
  auto where = [&](int64_t expert, size_t request) {
    for (int h = 0; h < 2; ++h)
      for (int64_t e : host[h]->asked[request])
        if (e == expert) return h;
    return -1;
  };
  run(layer, {0, 1, 2, 3});
  ASSERT_EQ(host[0]->asked.size(), 1u);
  EXPECT_EQ(host[0]->asked[0].size(), 2u) << "4 experts over 2 replicas: 2 each";
  EXPECT_EQ(host[1]->asked[0].size(), 2u);
  run(layer, {3, 2, 1, 0, 4, 5});
  for (int64_t e : {0, 1, 2, 3})
    EXPECT_EQ(where(e, 1), where(e, 0)) << "expert " << e << " moved to the other replica";
  EXPECT_NE(where(4, 1), where(5, 1)) << "the step's new experts were not balanced";
  if (f.config.num_moe_layers() >= 2) {
    run(layer + 1, {0, 1, 2, 3});
    run(layer, {0, 1, 2, 3, 4, 5});
    EXPECT_EQ(host[0]->asked[3].size(), 3u) << "a request after another layer balances afresh";
    EXPECT_EQ(host[1]->asked[3].size(), 3u);
  }
}

}  // namespace
}  // namespace k3::engine
