// PeerLimits (expertd/peer_limits.h) without a network: the per-peer and
// total caps and their refusals naming the flags, slots coming back when a
// stream ends, the idle sweep on a given clock (busy streams never idle,
// each stream cancelled once), the watcher thread, peer identities and the
// option ranges.
#include "expertd/peer_limits.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace k3::expertd {
namespace {

using Clock = PeerLimits::Clock;
using std::chrono::seconds;

PeerLimitsOptions limits(int per_peer, int total, int idle_s = 0) {
  PeerLimitsOptions o;
  o.max_streams_per_peer = per_peer;
  o.max_streams = total;
  o.idle_timeout_s = idle_s;
  return o;
}

TEST(PeerLimits, OnePeerGetsItsShareAndAnotherPeerStillGetsIn) {
  PeerLimits pl(limits(4, 48));
  std::vector<PeerLimits::Admission> a;
  for (int i = 0; i < 4; ++i) {
    auto s = pl.admit("10.0.0.5", {});
    ASSERT_TRUE(s.ok()) << s.status();
    a.push_back(std::move(*s));
  }
  auto refused = pl.admit("10.0.0.5", {});
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(msg(refused.status()).find("--remote-max-streams-per-peer 4"), std::string::npos)
      << refused.status();
  EXPECT_NE(msg(refused.status()).find("peer 10.0.0.5 already has 4"), std::string::npos)
      << refused.status();
  auto other = pl.admit("10.0.0.6", {});
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(pl.open(), 5);
  EXPECT_EQ(pl.open("10.0.0.5"), 4);
  EXPECT_EQ(pl.open("10.0.0.6"), 1);
  // One stream ends: its place comes back to that peer.
  a.pop_back();
  EXPECT_EQ(pl.open("10.0.0.5"), 3);
  EXPECT_TRUE(pl.admit("10.0.0.5", {}).ok());  // admitted, then released at once
  a.clear();
  other->release();
  EXPECT_EQ(pl.open(), 0);
  EXPECT_EQ(pl.open("10.0.0.5"), 0);
}

TEST(PeerLimits, TheTotalCapCountsEveryPeer) {
  PeerLimits pl(limits(2, 3));
  auto a1 = pl.admit("a", {}), a2 = pl.admit("a", {}), b1 = pl.admit("b", {});
  ASSERT_TRUE(a1.ok() && a2.ok() && b1.ok());
  auto b2 = pl.admit("b", {});
  ASSERT_EQ(b2.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(msg(b2.status()).find("--remote-max-streams 3"), std::string::npos) << b2.status();
  EXPECT_NE(msg(b2.status()).find("peer b"), std::string::npos) << b2.status();
  EXPECT_EQ(pl.open("b"), 1);  // the refusal left no count behind
  EXPECT_EQ(pl.open(), 3);
  a1->release();
  EXPECT_TRUE(pl.admit("b", {}).ok());
}

TEST(PeerLimits, AMovedAdmissionIsReleasedOnce) {
  PeerLimits pl(limits(2, 4));
  auto s = pl.admit("a", {});
  ASSERT_TRUE(s.ok());
  PeerLimits::Admission x = std::move(*s);
  PeerLimits::Admission y;
  y = std::move(x);
  x.release();  // moved from: nothing
  EXPECT_EQ(pl.open("a"), 1);
  y = PeerLimits::Admission();
  EXPECT_EQ(pl.open("a"), 0);
  EXPECT_EQ(pl.open(), 0);
}

TEST(PeerLimits, IdleStreamsAreCancelledOnceAndBusyOnesNever) {
  PeerLimits pl(limits(4, 8, /*idle_s=*/10));
  const Clock::time_point t0 = Clock::now();
  int cancelled_a = 0, cancelled_b = 0, cancelled_busy = 0;
  auto a = pl.admit(
      "a", [&] { ++cancelled_a; }, t0);
  auto b = pl.admit(
      "b", [&] { ++cancelled_b; }, t0 + seconds(5));
  auto busy = pl.admit(
      "a", [&] { ++cancelled_busy; }, t0);
  ASSERT_TRUE(a.ok() && b.ok() && busy.ok());
  busy->busy();  // a request in progress, however long
  EXPECT_TRUE(pl.cancel_idle(t0 + seconds(9)).empty());
  EXPECT_EQ(pl.cancel_idle(t0 + seconds(10)), std::vector<std::string>{"a"});
  EXPECT_EQ(cancelled_a, 1);
  EXPECT_EQ(cancelled_b, 0);
  EXPECT_EQ(pl.cancel_idle(t0 + seconds(15)), std::vector<std::string>{"b"});
  pl.cancel_idle(t0 + seconds(1000));
  EXPECT_EQ(cancelled_a, 1);  // once each
  EXPECT_EQ(cancelled_b, 1);
  EXPECT_EQ(cancelled_busy, 0);
  // Cancelled streams count until their handler ends them.
  EXPECT_EQ(pl.open(), 3);
  // Answered: the idle clock starts again from now.
  busy->done();
  const Clock::time_point t1 = Clock::now();
  EXPECT_TRUE(pl.cancel_idle(t1 + seconds(9)).empty());
  EXPECT_EQ(pl.cancel_idle(t1 + seconds(11)), std::vector<std::string>{"a"});
  EXPECT_EQ(cancelled_busy, 1);
}

TEST(PeerLimits, NoIdleTimeoutNeverCancels) {
  PeerLimits pl(limits(4, 8, 0));
  int cancelled = 0;
  auto a = pl.admit("a", [&] { ++cancelled; });
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(pl.cancel_idle(Clock::now() + seconds(1000000)).empty());
  EXPECT_EQ(cancelled, 0);
}

TEST(PeerLimits, TheWatcherCancelsIdleStreams) {
  PeerLimits pl(limits(4, 8, 1));
  std::atomic<int> cancelled{0}, heard{0};
  pl.start_idle_watch([&](const std::string& peer) {
    EXPECT_EQ(peer, "a");
    ++heard;
  });
  auto a = pl.admit("a", [&] { ++cancelled; });
  ASSERT_TRUE(a.ok());
  // Generous: about 1 to 2 s on an idle machine.
  const auto until = Clock::now() + seconds(60);
  while (heard.load() == 0 && Clock::now() < until)
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(cancelled.load(), 1);
  EXPECT_EQ(heard.load(), 1);
}

TEST(PeerLimits, PeerIdentityIsTheAddressWithoutThePort) {
  EXPECT_EQ(peer_identity("ipv4:10.0.0.5:41234"), "10.0.0.5");
  EXPECT_EQ(peer_identity("ipv4:127.0.0.1:1"), "127.0.0.1");
  EXPECT_EQ(peer_identity("ipv6:[::1]:41234"), "::1");
  EXPECT_EQ(peer_identity("ipv6:[fe80::1%25eth0]:7070"), "fe80::1%25eth0");
  EXPECT_EQ(peer_identity("ipv6:[::ffff:10.0.0.5]:41234"), "10.0.0.5");
  EXPECT_EQ(peer_identity("ipv6:%5B::1%5D:41234"), "::1");  // URI-escaped (newer gRPC)
  EXPECT_EQ(peer_identity("ipv6:%5b::ffff:10.0.0.5%5d:41234"), "10.0.0.5");
  EXPECT_EQ(peer_identity("ipv6:[::1"), "ipv6:[::1");  // malformed: kept whole
  EXPECT_EQ(peer_identity("unix:/run/x.sock"), "unix:/run/x.sock");
  EXPECT_EQ(peer_identity(""), "");
}

TEST(PeerLimits, OptionsOutOfRangeNameTheFlag) {
  EXPECT_TRUE(validate(PeerLimitsOptions()).ok());
  EXPECT_TRUE(validate(limits(1, 1, 0)).ok());
  EXPECT_TRUE(validate(limits(kMaxRemoteStreams, kMaxRemoteStreams, 86400)).ok());
  struct Case {
    PeerLimitsOptions o;
    const char* flag;
  } cases[] = {
      {limits(4, 0), "--remote-max-streams 0"},
      {limits(4, kMaxRemoteStreams + 1), "--remote-max-streams 57"},
      {limits(0, 8), "--remote-max-streams-per-peer 0"},
      {limits(9, 8), "--remote-max-streams-per-peer 9"},
      {limits(4, 8, -1), "--remote-idle-timeout-s -1"},
      {limits(4, 8, 86401), "--remote-idle-timeout-s 86401"},
  };
  for (const Case& c : cases) {
    const Status s = validate(c.o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.flag;
    EXPECT_NE(msg(s).find(c.flag), std::string::npos) << s;
  }
  // The reserve: remote streams never take the last client slots.
  EXPECT_EQ(kMaxRemoteStreams + kLocalReserve, static_cast<int>(shm::kMaxClients));
  EXPECT_GE(kLocalReserve, 8);
  EXPECT_LE(PeerLimitsOptions().max_streams, kMaxRemoteStreams);
}

}  // namespace
}  // namespace k3::expertd
