// The shared-memory ring protocol, both halves, over a real POSIX segment;
// dead-client reclaim with a real second process (fork + SIGKILL).
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <string>

#include "shared/shm/client_ring.h"
#include "shared/shm/futex.h"
#include "shared/shm/segment.h"
#include "shared/shm/server_ring.h"

namespace k3::shm {
namespace {

// A segment laid out like expertd's, with slot 0 holding expert 5 of layer 1.
class RingTest : public ::testing::Test {
 protected:
  void SetUp() override {
    name_ = "k3test-ring-" + std::to_string(::getpid()) + "-" +
            ::testing::UnitTest::GetInstance()->current_test_info()->name();
    Segment::remove(name_);
    Geometry g;
    g.num_layers = 2;
    g.num_experts = 8;
    g.slot_count = 4;
    g.expert_bytes = 5000;
    auto seg = Segment::create(name_, g.total_bytes());
    ASSERT_TRUE(seg.ok()) << seg.status();
    seg_ = std::move(*seg);
    init_header(seg_.base(), g, 42, 7);
    header_of(seg_.base())->server_pid.store(::getpid());
    header_of(seg_.base())->server_start_time = process_start_time(::getpid());
    header_of(seg_.base())->ready.store(1);
    fill_slot(0, 1, 5);
    server_ = ServerRing(seg_.base());
  }
  void TearDown() override { Segment::remove(name_); }

  void fill_slot(uint32_t s, int32_t layer, int32_t expert) {
    SlotEntry& e = slots_of(seg_.base())[s];
    e.layer.store(layer);
    e.expert.store(expert);
    e.generation.fetch_add(1);
    e.data_offset.store(header_of(seg_.base())->data_offset +
                        s * header_of(seg_.base())->slot_stride);
    e.state.store(static_cast<uint32_t>(SlotState::kReady));
  }
  uint64_t pins(uint32_t s) { return slots_of(seg_.base())[s].pins.load(); }

  // Serves every queued request with slot 0 (ok when it names expert 5 of
  // layer 1, NOT_FOUND otherwise).
  size_t serve() {
    const size_t n = server_.drain_requests([&](uint32_t c, const Request& r) {
      const bool ok = r.layer == 1 && r.expert == 5;
      server_.publish(c, r.tag, ok ? 0 : UINT32_MAX, ok ? 0 : 5, ok ? kCompletionRead : 0);
    });
    server_.wake_pending();
    return n;
  }

  std::string name_;
  Segment seg_;
  ServerRing server_;
};

TEST_F(RingTest, RequestCompletionLeaseRoundTrip) {
  auto client = ClientRing::attach(seg_.base());
  ASSERT_TRUE(client.ok()) << client.status();
  EXPECT_EQ(server_.active_clients(), 1u);
  ASSERT_TRUE(client->post({1, 5, 3, 0}));
  ASSERT_TRUE(client->post({1, 6, 4, 0}));
  EXPECT_EQ(client->requests_queued(), 2u);
  const uint32_t seen = client->completion_seq();
  EXPECT_EQ(serve(), 2u);
  EXPECT_EQ(client->requests_queued(), 0u);
  EXPECT_TRUE(client->wait(seen, 1000));  // already bumped: returns at once
  std::vector<Completion> got;
  ASSERT_EQ(client->drain(&got), 2u);
  EXPECT_EQ(got[0].tag, 3u);
  EXPECT_EQ(got[0].status, 0);
  EXPECT_EQ(got[0].flags, kCompletionRead);
  EXPECT_EQ(got[1].tag, 4u);
  EXPECT_EQ(got[1].status, 5);
  const uint64_t bit = 1ull << client->client();
  EXPECT_EQ(pins(0), bit);  // the grant pinned the slot

  auto lease = client->lease(got[0], 1, 5);
  ASSERT_TRUE(lease.ok()) << lease.status();
  EXPECT_TRUE(lease->valid());
  EXPECT_EQ(lease->data(),
            static_cast<const uint8_t*>(seg_.base()) + header_of(seg_.base())->data_offset);
  EXPECT_TRUE(server_.pinned(0));
  {
    ExpertLease moved = std::move(*lease);
    EXPECT_FALSE(lease->valid());
    EXPECT_TRUE(moved.valid());
  }  // the moved-to lease unpins
  EXPECT_EQ(pins(0), 0u);
  EXPECT_FALSE(server_.pinned(0));
}

TEST_F(RingTest, LeaseRefusesAndNoticesAChangedSlot) {
  auto client = ClientRing::attach(seg_.base());
  ASSERT_TRUE(client.ok());
  ASSERT_TRUE(client->post({1, 5, 0, 0}));
  serve();
  std::vector<Completion> got;
  ASSERT_EQ(client->drain(&got), 1u);
  // The wrong expert for the slot: refused, and the grant's pin dropped.
  auto wrong = client->lease(got[0], 1, 6);
  EXPECT_EQ(wrong.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(pins(0), 0u);

  // A grant nobody wants any more is dropped without a lease.
  ASSERT_TRUE(client->post({1, 5, 0, 0}));
  serve();
  got.clear();
  ASSERT_EQ(client->drain(&got), 1u);
  EXPECT_NE(pins(0), 0u);
  client->drop_grant(got[0]);
  EXPECT_EQ(pins(0), 0u);

  ASSERT_TRUE(client->post({1, 5, 0, 0}));
  serve();
  got.clear();
  ASSERT_EQ(client->drain(&got), 1u);
  auto lease = client->lease(got[0], 1, 5);
  ASSERT_TRUE(lease.ok());
  fill_slot(0, 1, 5);  // new contents: generation moves on
  EXPECT_FALSE(lease->valid());
  // A slot out of range is refused.
  Completion bad = got[0];
  bad.slot = 99;
  EXPECT_EQ(client->lease(bad, 1, 5).status().code(), absl::StatusCode::kDataLoss);
}

TEST_F(RingTest, FullRingRefusesPostsAndDetachClearsPins) {
  auto client = ClientRing::attach(seg_.base());
  ASSERT_TRUE(client.ok());
  for (uint32_t i = 0; i < kRingSize; ++i) ASSERT_TRUE(client->post({1, 5, i, 0}));
  EXPECT_FALSE(client->post({1, 5, 0, 0}));
  EXPECT_EQ(serve(), kRingSize);
  EXPECT_NE(pins(0), 0u);
  client->detach();
  EXPECT_EQ(pins(0), 0u);
  EXPECT_EQ(server_.active_clients(), 0u);
  // A completion to a detached client is not published.
  EXPECT_FALSE(server_.publish(0, 0, 0, 0, 0));
}

// A client's ring head is untrusted: expertd never reads more than one
// ring's worth of requests from it.
TEST_F(RingTest, AnUntrustedRequestHeadIsClamped) {
  auto client = ClientRing::attach(seg_.base());
  ASSERT_TRUE(client.ok());
  ClientArea& ca = clients_of(seg_.base())[client->client()];
  ca.req_head.store(ca.req_tail.load() + 10 * kRingSize);
  size_t seen = 0;
  EXPECT_EQ(server_.drain_requests([&](uint32_t, const Request&) { ++seen; }), kRingSize);
  EXPECT_EQ(seen, kRingSize);
  EXPECT_EQ(client->requests_queued(), 0u);
}

TEST_F(RingTest, AllClientAreasTaken) {
  std::vector<ClientRing> rings;
  for (uint32_t c = 0; c < kMaxClients; ++c) {
    auto r = ClientRing::attach(seg_.base());
    ASSERT_TRUE(r.ok());
    rings.push_back(std::move(*r));
  }
  EXPECT_EQ(ClientRing::attach(seg_.base()).status().code(), absl::StatusCode::kResourceExhausted);
  rings.pop_back();
  EXPECT_TRUE(ClientRing::attach(seg_.base()).ok());
}

TEST_F(RingTest, DeadClientsPinsAreReclaimed) {
  int pipefd[2];
  ASSERT_EQ(::pipe(pipefd), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    // The client process: maps the segment itself, leases expert 5, holds it.
    ::close(pipefd[0]);
    auto seg = Segment::open(name_);
    if (!seg.ok()) _exit(2);
    auto ring = ClientRing::attach(seg->base());
    if (!ring.ok() || !ring->post({1, 5, 9, 0})) _exit(3);
    ring->ring_doorbell();
    std::vector<Completion> got;
    for (int i = 0; i < 500 && got.empty(); ++i) {
      const uint32_t seen = ring->completion_seq();
      if (ring->drain(&got) == 0) ring->wait(seen, 10);
    }
    if (got.empty()) _exit(4);
    auto lease = ring->lease(got[0], 1, 5);
    if (!lease.ok() || !lease->valid()) _exit(5);
    const char c = 'h';
    if (::write(pipefd[1], &c, 1) != 1) _exit(6);
    for (;;) ::pause();
  }
  ::close(pipefd[1]);
  for (int i = 0; i < 500 && server_.active_clients() == 0; ++i) ::usleep(10000);
  size_t served = 0;
  for (int i = 0; i < 500 && served == 0; ++i) {
    const uint32_t bell = server_.doorbell();
    served = serve();
    if (served == 0) server_.wait_doorbell(bell, 10);
  }
  ASSERT_EQ(served, 1u);
  char c = 0;
  ASSERT_EQ(::read(pipefd[0], &c, 1), 1);  // the child holds its lease
  ::close(pipefd[0]);
  EXPECT_TRUE(server_.pinned(0));
  // A live client is not reclaimed.
  EXPECT_EQ(server_.reclaim_dead_clients([](uint32_t, int, uint32_t) {}), 0u);
  ::kill(child, SIGKILL);
  int status = 0;
  ASSERT_EQ(::waitpid(child, &status, 0), child);
  uint32_t released = 0;
  int dead_pid = 0;
  EXPECT_EQ(server_.reclaim_dead_clients([&](uint32_t, int pid, uint32_t n) {
    dead_pid = pid;
    released = n;
  }),
            1u);
  EXPECT_EQ(dead_pid, child);
  EXPECT_EQ(released, 1u);
  EXPECT_FALSE(server_.pinned(0));
  EXPECT_EQ(server_.active_clients(), 0u);
}

}  // namespace
}  // namespace k3::shm
