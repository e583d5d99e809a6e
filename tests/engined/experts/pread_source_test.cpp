// The asynchronous expert interface over the in-process source (real shard
// files, real loader threads): bytes and computed rows, request checks,
// replacing a request in flight, speculative reads.
#include "engined/experts/pread_source.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <cstring>
#include <thread>

#include "shared/kernels/mxfp4.h"
#include "tests/engined/experts/source_fixture.h"
#include "tests/test_util.h"

namespace k3::engined {

namespace {

using test::Acts;
using test::Fixture;

TEST(PreadSource, DeliversEachExpertsBytesOnce) {
  Fixture f;
  auto src = f.source();
  const int64_t layer = f.config.first_k_dense_replace;
  std::vector<int64_t> ids = {5, 0, 3};
  std::vector<int> seen(ids.size(), 0);
  ASSERT_TRUE(experts::fetch_bytes(*src, layer, ids, [&](size_t i, const uint8_t* b) {
                const auto want = f.file_bytes(layer, ids[i]);
                EXPECT_EQ(std::memcmp(b, want.data(), want.size()), 0) << "expert " << ids[i];
                ++seen[i];
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(seen, std::vector<int>({1, 1, 1}));
  EXPECT_EQ(src->outstanding(), 0u);
  EXPECT_EQ(src->next().status().code(), absl::StatusCode::kFailedPrecondition);
  const experts::ExpertSourceStats st = src->stats();
  EXPECT_EQ(st.requests, 3u);
  EXPECT_EQ(st.reads, 3u);
  EXPECT_EQ(st.bytes_read, 3 * f.index->expert_bytes());
  // Again: all resident.
  ASSERT_TRUE(experts::fetch_bytes(*src, layer, ids, [](size_t, const uint8_t*) {
                return absl::OkStatus();
              }).ok());
  EXPECT_EQ(src->stats().hits, 3u);
  EXPECT_EQ(src->stats().reads, 3u);
}

// "Compute these rows" through the source gives exactly the rows computed on
// the delivered bytes with the same kernels, for both kernels.
TEST(PreadSource, ComputedRowsEqualRowsComputedOnTheBytes) {
  Fixture f;
  const int64_t layer = f.config.first_k_dense_replace;
  const int64_t lat = f.shape.latent;
  for (bool int8 : {true, false}) {
    auto src = f.source(/*cache_bytes=*/1, /*threads=*/1);  // two slots: reads overlap compute
    Acts a(5, lat, int8);
    experts::ExpertRequest r;
    r.layer = layer;
    r.activations = &a.act;
    r.work = {{7, true, {0, 3, 4}}, {2, true, {1}}, {4, true, {2, 0}}, {1, false, {}}};
    ASSERT_TRUE(src->submit(r).ok());
    std::vector<int> seen(r.work.size(), 0);
    for (size_t n = 0; n < r.work.size(); ++n) {
      auto c = src->next();
      ASSERT_TRUE(c.ok()) << c.status();
      ++seen[c->index];
      const experts::ExpertWork& w = r.work[c->index];
      const auto bytes = f.file_bytes(layer, w.expert);
      if (!w.compute) {
        EXPECT_EQ(std::memcmp(c->bytes, bytes.data(), bytes.size()), 0);
        EXPECT_TRUE(c->rows.empty());
        continue;
      }
      ASSERT_EQ(c->rows.size(), w.rows.size() * lat);
      std::vector<float> want(w.rows.size() * lat);
      experts::compute_expert_rows(f.shape, bytes.data(), a.act, w.rows, want.data());
      EXPECT_EQ(std::memcmp(c->rows.data(), want.data(), want.size() * 4), 0)
          << "expert " << w.expert << " int8 " << int8;
    }
    EXPECT_EQ(seen, std::vector<int>({1, 1, 1, 1}));
    EXPECT_GT(src->stats().compute_seconds, 0.0);
  }
}

TEST(PreadSource, RefusesBadRequests) {
  Fixture f;
  auto src = f.source();
  const int64_t layer = f.config.first_k_dense_replace;
  Acts a(2, f.shape.latent, true);
  auto code = [&](experts::ExpertRequest r) { return src->submit(r).code(); };
  experts::ExpertRequest r;
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
  r.priority = experts::ExpertPriority::kSpeculative;
  EXPECT_EQ(code(r), absl::StatusCode::kInvalidArgument) << "speculative compute";
  r.priority = experts::ExpertPriority::kDemand;
  r.layer = 0;  // a dense layer
  if (f.config.first_k_dense_replace > 0) {
    EXPECT_EQ(code(r), absl::StatusCode::kNotFound);
  }
  r.layer = layer;
  EXPECT_TRUE(src->submit(r).ok());
  EXPECT_TRUE(src->next().ok());
}

// A new demand request replaces the one in flight: only its completions come.
TEST(PreadSource, ANewRequestReplacesTheOneInFlight) {
  Fixture f;
  auto src = f.source(/*cache_bytes=*/1, /*threads=*/1);
  const int64_t layer = f.config.first_k_dense_replace;
  experts::ExpertRequest a;
  a.layer = layer;
  for (int64_t e = 0; e < 6; ++e) a.work.push_back({e, false, {}});
  ASSERT_TRUE(src->submit(a).ok());
  ASSERT_TRUE(src->next().ok());
  experts::ExpertRequest b;
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
TEST(PreadSource, SpeculativeReadsWarmTheCache) {
  Fixture f;
  auto src = f.source();
  const int64_t layer = f.config.first_k_dense_replace;
  experts::ExpertRequest spec;
  spec.layer = layer;
  spec.priority = experts::ExpertPriority::kSpeculative;
  spec.work = {{2, false, {}}, {9, false, {}}};  // kSpeculativeInFlight of them
  ASSERT_TRUE(src->submit(spec).ok());
  EXPECT_EQ(src->outstanding(), 0u) << "speculative requests never complete";
  EXPECT_EQ(src->stats().speculative, 2u);
  std::this_thread::sleep_for(std::chrono::milliseconds(500));  // tiny reads: long done
  ASSERT_TRUE(experts::fetch_bytes(*src, layer, {2, 9}, [](size_t, const uint8_t*) {
                return absl::OkStatus();
              }).ok());
  const experts::ExpertSourceStats st = src->stats();
  EXPECT_EQ(st.requests, 2u);
  EXPECT_EQ(st.hits, 2u);
  EXPECT_EQ(st.reads, 0u) << "speculative reads are not counted as demand reads";
}

}  // namespace
}  // namespace k3::engined
