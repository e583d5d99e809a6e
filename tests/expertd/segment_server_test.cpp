// The segment server in this process (the other expertd suites run expertd
// as a subprocess): a client's lease on the bytes it read, the generation
// check that refuses a grant whose slot was rewritten since, and the
// reaping of the pins of a client that died.
#include "expertd/segment_server.h"

#include <gtest/gtest.h>

#include <chrono>
#include <csignal>
#include <cstring>
#include <thread>
#include <vector>

#include "expertd/shard_set.h"
#include "shared/shm/client_ring.h"
#include "shared/shm/segment.h"
#include "tests/expertd/expertd_harness.h"
#include "tests/test_util.h"

namespace k3::expertd {

using k3::checkpoint::ExpertIndex;
using k3::checkpoint::ExpertLayout;
using k3::checkpoint::ExpertLocation;
namespace {

using testing::TempDir;

bool until(const std::function<bool()>& pred, double seconds) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  while (std::chrono::steady_clock::now() < deadline) {
    if (pred()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return pred();
}

// One client of the segment: posts a request and waits for its completion.
struct Client {
  shm::Segment seg;
  shm::ClientRing ring;

  static Client attach(const std::string& segment) {
    Client c;
    auto seg = shm::Segment::open(segment);
    EXPECT_TRUE(seg.ok()) << seg.status();
    c.seg = std::move(*seg);
    auto ring = shm::ClientRing::attach(c.seg.base());
    EXPECT_TRUE(ring.ok()) << ring.status();
    c.ring = std::move(*ring);
    return c;
  }

  shm::Completion ask(int32_t layer, int32_t expert, uint32_t tag) {
    EXPECT_TRUE(ring.post(shm::Request{layer, expert, tag, 0}));
    ring.ring_doorbell();
    std::vector<shm::Completion> got;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (got.empty() && std::chrono::steady_clock::now() < deadline) {
      const uint32_t seen = ring.completion_seq();
      if (ring.drain(&got) == 0) ring.wait(seen, 100);
    }
    EXPECT_EQ(got.size(), 1u);
    if (got.empty()) return shm::Completion{tag, UINT32_MAX, 0, -1, 0};
    EXPECT_EQ(got[0].tag, tag);
    return got[0];
  }
};

struct Served {
  std::unique_ptr<ShardSet> shards;
  std::unique_ptr<SegmentServer> server;
  std::string segment = expertd_test::unique_segment("inproc");
  int32_t layer = 0;  // the first MoE layer

  explicit Served(uint64_t cache_bytes) {
    auto s = ShardSet::open(testing::tiny_model_dir(), {});
    EXPECT_TRUE(s.ok()) << s.status();
    shards = std::move(*s);
    SegmentServerOptions o;
    o.segment = segment;
    o.cache_bytes = cache_bytes;
    auto started = SegmentServer::start(*shards, o);
    EXPECT_TRUE(started.ok()) << started.status();
    server = std::move(*started);
    layer = static_cast<int32_t>(shards->config().first_k_dense_replace);
  }
  // The expert's bytes as the checkpoint holds them.
  std::vector<uint8_t> expected(int32_t expert) const {
    const ExpertIndex& index = shards->index();
    std::vector<uint8_t> out(index.expert_bytes());
    const ExpertLocation& loc = index.at(layer, expert);
    const ExpertLayout& lay = index.layout();
    for (int i = 0; i < 6; ++i) {
      Status s = shards->checkpoint().file(loc.file).pread_exact(
          out.data() + lay.offset[i], lay.nbytes[i], loc.tensor_offset[i]);
      EXPECT_TRUE(s.ok()) << s;
    }
    return out;
  }
};

TEST(SegmentServer, LeasesWhatItReadThenServesItResident) {
  Served s(64ull << 20);
  Client c = Client::attach(s.segment);
  const shm::Completion cp = c.ask(s.layer, 1, 7);
  ASSERT_EQ(cp.status, 0);
  EXPECT_TRUE(cp.flags & shm::kCompletionRead) << "a miss says it was read";
  auto lease = c.ring.lease(cp, s.layer, 1);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(lease->valid());
  const std::vector<uint8_t> want = s.expected(1);
  EXPECT_EQ(std::memcmp(lease->data(), want.data(), want.size()), 0);
  SegmentServerStats st = s.server->stats();
  EXPECT_EQ(st.reads, 1u);
  EXPECT_EQ(st.misses, 1u);
  EXPECT_EQ(st.slots_pinned, 1u);
  EXPECT_EQ(st.clients, 1u);
  lease->release();
  EXPECT_EQ(s.server->stats().slots_pinned, 0u);

  const shm::Completion again = c.ask(s.layer, 1, 8);
  ASSERT_EQ(again.status, 0);
  EXPECT_FALSE(again.flags & shm::kCompletionRead) << "resident: no second read";
  EXPECT_EQ(again.slot, cp.slot);
  c.ring.drop_grant(again);
  st = s.server->stats();
  EXPECT_EQ(st.hits, 1u);
  EXPECT_EQ(st.reads, 1u);

  // An expert the model does not have is refused, not read.
  const shm::Completion bad = c.ask(s.layer, 1 << 20, 9);
  EXPECT_EQ(bad.status, static_cast<int32_t>(absl::StatusCode::kNotFound));
}

// A grant whose pin was dropped no longer protects its slot: once another
// expert is read into it, adopting the old grant fails (the generation and
// the expert changed) instead of handing out the wrong bytes.
TEST(SegmentServer, AGrantForARewrittenSlotIsRefused) {
  Served s(0);  // the smallest cache: two slots
  ASSERT_EQ(s.server->slot_count(), 2u);
  Client c = Client::attach(s.segment);
  const shm::Completion first = c.ask(s.layer, 2, 1);
  ASSERT_EQ(first.status, 0);
  c.ring.drop_grant(first);
  for (int32_t e : {3, 4}) {  // two more experts evict expert 2
    const shm::Completion cp = c.ask(s.layer, e, static_cast<uint32_t>(10 + e));
    ASSERT_EQ(cp.status, 0);
    c.ring.drop_grant(cp);
  }
  auto stale = c.ring.lease(first, s.layer, 2);
  ASSERT_FALSE(stale.ok());
  EXPECT_EQ(stale.status().code(), absl::StatusCode::kDataLoss) << stale.status();
  EXPECT_EQ(s.server->stats().slots_pinned, 0u) << "the refused adoption dropped its pin";
}

// A client process killed while it holds leases: its pins are reclaimed and
// its client area freed, so its slots can be recycled.
TEST(SegmentServer, ReapsTheLeasesOfADeadClient) {
  Served s(64ull << 20);
  TempDir tmp;
  testing::Process holder({std::string(K3_TEST_BIN_DIR) + "/lease_holder", s.segment,
                           testing::tiny_model_dir(), std::to_string(s.layer), "1", "2", "3"},
                          tmp.file("holder.log"));
  ASSERT_TRUE(until([&] { return s.server->stats().slots_pinned == 3; }, 20))
      << s.server->stats().slots_pinned
      << " pinned; holder: " << testing::read_file(tmp.file("holder.log"));
  EXPECT_EQ(s.server->stats().clients, 1u);
  EXPECT_EQ(holder.stop(SIGKILL), 128 + SIGKILL);
  EXPECT_TRUE(until([&] { return s.server->stats().slots_pinned == 0; }, 10))
      << s.server->stats().slots_pinned << " still pinned";
  const SegmentServerStats st = s.server->stats();
  EXPECT_EQ(st.reclaimed_clients, 1u);
  EXPECT_EQ(st.clients, 0u);
}

}  // namespace
}  // namespace k3::expertd
