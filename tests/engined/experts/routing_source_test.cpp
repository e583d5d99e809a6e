// The source over sources (routing_source.h) on in-process sources: each
// expert goes to its first owner and stats are summed; replicas are
// balanced and a step's experts stay where they were read.
#include "engined/experts/routing_source.h"

#include <gtest/gtest.h>

#include "tests/engined/experts/forwarding_source.h"
#include "tests/engined/experts/source_fixture.h"

namespace k3::engined {

using k3::experts::compute_expert_rows;
using k3::experts::ExpertRequest;
using k3::experts::ExpertSource;
using k3::experts::ExpertWork;

namespace {

using test::Acts;
using test::Fixture;

TEST(RoutingSource, RoutesToTheFirstOwnerAndSumsStats) {
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
TEST(RoutingSource, BalancesReplicasAndKeepsAStepsExpertsWhereTheyWereRead) {
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
}  // namespace k3::engined
