// Remote expertd over a real network: two storage hosts, each in its own
// network namespace joined to the root namespace by a veth pair (rate
// limited to 1 Gbit/s with tc tbf; this kernel has no netem), engined in the
// root namespace. Bit-identical logits through remote compute and bytes
// mode with the experts split over the hosts, the bytes on the link, greedy
// output unchanged when a replica is killed (-9) or its link is set down
// mid-generation, and the only owner's loss named, then recovered from.
// Names and subnets come from the test's pid (ctest runs tests in parallel).
// Skipped, saying why, where namespaces cannot be made (not root).
#include <gtest/gtest.h>
#include <signal.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <thread>

#include "shared/checkpoint/model_config.h"
#include "tests/expertd/remote_harness.h"

namespace k3 {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;
using namespace expertd_test;

const std::vector<std::string> kInsecure = {"--insecure-remote"};

testing::CommandResult sh(const std::string& cmd) {
  return testing::run_command({"/bin/sh", "-c", cmd + " 2>&1"});
}

// Host i's namespace, its veth pair (root end, host end) and a /30 of
// 10.X.Y.0/24 with X, Y from the pid.
class Net {
 public:
  explicit Net(int hosts) : hosts_(hosts) {
    const int pid = static_cast<int>(::getpid());
    tag_ = std::to_string(pid);
    x_ = (pid / 250) % 250 + 1;
    y_ = pid % 250;
    if (::geteuid() != 0) {
      why_ = "needs root to make network namespaces";
      return;
    }
    for (int i = 0; i < hosts; ++i) {
      const std::string cmds[] = {
          cat("ip netns add ", ns(i)),
          cat("ip link add ", dev(i), " type veth peer name ", peer(i)),
          cat("ip link set ", peer(i), " netns ", ns(i)),
          cat("ip addr add ", root_ip(i), "/30 dev ", dev(i)),
          cat("ip link set ", dev(i), " up"),
          cat("ip -n ", ns(i), " addr add ", ip(i), "/30 dev ", peer(i)),
          cat("ip -n ", ns(i), " link set ", peer(i), " up"),
          cat("ip -n ", ns(i), " link set lo up"),
      };
      made_ = i + 1;
      for (const std::string& c : cmds) {
        auto r = sh(c);
        if (r.exit_code != 0) {
          why_ = cat("cannot make network namespaces (", c, "): ", r.out);
          return;
        }
      }
      // 1 Gbit/s both ways where the kernel has tbf (no netem here).
      auto r1 =
          sh(cat("tc qdisc add dev ", dev(i), " root tbf rate 1gbit burst 256kb latency 20ms"));
      auto r2 = sh(cat("ip netns exec ", ns(i), " tc qdisc add dev ", peer(i),
                       " root tbf rate 1gbit burst 256kb latency 20ms"));
      if (r1.exit_code != 0 || r2.exit_code != 0)
        std::fprintf(stderr, "note: no tc tbf rate limit (%s%s)\n", r1.out.c_str(), r2.out.c_str());
    }
  }
  ~Net() {
    for (int i = 0; i < made_; ++i) {
      sh(cat("ip link del ", dev(i)));
      sh(cat("ip netns del ", ns(i)));
    }
  }
  bool ok() const { return why_.empty(); }
  const std::string& why() const { return why_; }
  std::string ns(int i) const { return cat("k3r", tag_, "h", i); }
  std::string dev(int i) const { return cat("k3v", tag_, "a", i); }
  std::string peer(int i) const { return cat("k3v", tag_, "b", i); }
  std::string root_ip(int i) const { return cat("10.", x_, ".", y_, ".", 4 * i + 1); }
  std::string ip(int i) const { return cat("10.", x_, ".", y_, ".", 4 * i + 2); }
  std::vector<std::string> exec(int i) const { return {"/usr/sbin/ip", "netns", "exec", ns(i)}; }
  bool link(int i, bool up) const {
    return sh(cat("ip link set ", dev(i), up ? " up" : " down")).exit_code == 0;
  }
  // Bytes through host i's link, both directions, as the interface counts them.
  uint64_t link_bytes(int i) const {
    uint64_t t = 0;
    for (const char* f : {"rx_bytes", "tx_bytes"}) {
      std::ifstream in(cat("/sys/class/net/", dev(i), "/statistics/", f));
      uint64_t v = 0;
      in >> v;
      t += v;
    }
    return t;
  }

 private:
  int hosts_ = 0, made_ = 0, x_ = 0, y_ = 0;
  std::string tag_, why_;
};

std::unique_ptr<RemoteExpertd> host_in(const TempDir& tmp, const Net& net, int i,
                                       const std::string& model, const std::string& tag,
                                       const std::string& port = "0") {
  return std::make_unique<RemoteExpertd>(tmp, tag, kInsecure, model, "", cat(net.ip(i), ":", port),
                                         net.exec(i));
}

std::vector<int32_t> tiny_prompt(int n) {
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  return prompt(n, static_cast<int32_t>(c->vocab_size));
}

// k3ctl place over two drives: each host owns half of every layer's experts.
TEST(RemoteNetns, HalfTheExpertsOnEachHostBitIdenticalInComputeAndBytesMode) {
  Net net(2);
  if (!net.ok()) GTEST_SKIP() << net.why();
  TempDir tmp;
  const std::string d0 = tmp.file("drive0"), d1 = tmp.file("drive1");
  fs::create_directory(d0);
  fs::create_directory(d1);
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "place", "--model",
                                 testing::tiny_model_dir(), "--drives", d0 + "," + d1, "--apply"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto h0 = host_in(tmp, net, 0, d0, "nsh0");
  auto h1 = host_in(tmp, net, 1, d1, "nsh1");
  ASSERT_TRUE(h0->wait_ready()) << h0->log();
  ASSERT_TRUE(h1->wait_ready()) << h1->log();
  const auto ids = tiny_prompt(16);
  const auto want = score_standalone(ids);
  auto xo = insecure_hosts({{"s0", h0->address}, {"s1", h1->address}});
  Status st;
  experts::ExpertSourceStats es;
  const uint64_t link0 = net.link_bytes(0) + net.link_bytes(1);
  const auto got = score_with(xo, ids, &st, &es);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
  const uint64_t compute_link = net.link_bytes(0) + net.link_bytes(1) - link0;
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  // Both hosts computed, and only the hosts: one message per host per layer.
  EXPECT_GT(h0->stats().remote_rows(), 0u);
  EXPECT_GT(h1->stats().remote_rows(), 0u);
  EXPECT_EQ(h0->stats().remote_rows() + h1->stats().remote_rows(),
            static_cast<uint64_t>(ids.size() * c->num_experts_per_token * c->num_moe_layers()));
  EXPECT_EQ(h0->stats().remote_requests(), static_cast<uint64_t>(c->num_moe_layers()));
  EXPECT_EQ(h1->stats().remote_requests(), static_cast<uint64_t>(c->num_moe_layers()));
  // The link carried at least what the streams counted (plus TCP/IP, HTTP/2).
  EXPECT_GE(compute_link, es.network_bytes);

  xo.remote_bytes = true;
  const uint64_t link1 = net.link_bytes(0) + net.link_bytes(1);
  const auto got_bytes = score_with(xo, ids, &st, &es);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(std::memcmp(got_bytes.data(), want.data(), got_bytes.size() * 4), 0);
  const uint64_t bytes_link = net.link_bytes(0) + net.link_bytes(1) - link1;
  EXPECT_GE(bytes_link, es.requests * c->expert_bytes());
  EXPECT_LT(compute_link, bytes_link);
  std::fprintf(stderr, "link bytes: compute %llu, bytes mode %llu\n",
               static_cast<unsigned long long>(compute_link),
               static_cast<unsigned long long>(bytes_link));
}

// Two replicas (each owns every expert): one is killed with -9, then (with
// it back) the other's link goes down, both mid-generation: greedy ids
// unchanged, the lost host's work re-issued on the other.
TEST(RemoteNetns, GreedyOutputSurvivesAKilledReplicaAndALinkDown) {
  Net net(2);
  if (!net.ok()) GTEST_SKIP() << net.why();
  TempDir tmp;
  const auto ids = tiny_prompt(6);
  Status st;
  const auto want = greedy_with(engined::ExpertSourceOptions{}, ids, 8, &st);
  ASSERT_TRUE(st.ok()) << st;
  auto h0 = host_in(tmp, net, 0, testing::tiny_model_dir(), "nsk0");
  auto h1 = host_in(tmp, net, 1, testing::tiny_model_dir(), "nsk1");
  ASSERT_TRUE(h0->wait_ready()) << h0->log();
  ASSERT_TRUE(h1->wait_ready()) << h1->log();
  auto xo = insecure_hosts({{"s0", h0->address}, {"s1", h1->address}}, 2000);
  experts::ExpertSourceStats es;
  auto got = greedy_with(
      xo, ids, 8, &st,
      [&](int i) {
        if (i == 2) ::kill(h0->d->proc->pid(), SIGKILL);
      },
      &es);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(got, want);

  h0 = host_in(tmp, net, 0, testing::tiny_model_dir(), "nsk0b");
  ASSERT_TRUE(h0->wait_ready()) << h0->log();
  xo = insecure_hosts({{"s0", h0->address}, {"s1", h1->address}}, 2000);
  const uint64_t h0_before = h0->stats().remote_requests();
  got = greedy_with(
      xo, ids, 8, &st,
      [&](int i) {
        if (i == 2) ASSERT_TRUE(net.link(1, false));
      },
      &es);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(got, want);
  EXPECT_GT(h0->stats().remote_requests(), h0_before);
  net.link(1, true);
}

// The only owner dies: UNAVAILABLE naming it; after it restarts on the same
// address, the same source serves again.
TEST(RemoteNetns, TheOnlyOwnerDyingIsNamedAndItsRestartRecovers) {
  Net net(1);
  if (!net.ok()) GTEST_SKIP() << net.why();
  TempDir tmp;
  auto h = host_in(tmp, net, 0, testing::tiny_model_dir(), "nso");
  ASSERT_TRUE(h->wait_ready()) << h->log();
  const std::string port = h->address.substr(h->address.rfind(':') + 1);
  const auto ids = tiny_prompt(6);
  Status st;
  const auto want = greedy_with(engined::ExpertSourceOptions{}, ids, 6, &st);
  ASSERT_TRUE(st.ok()) << st;
  auto xo = insecure_hosts({{"storage0", h->address}}, 2000);
  auto got = greedy_with(xo, ids, 6, &st, [&](int i) {
    if (i == 1) ::kill(h->d->proc->pid(), SIGKILL);
  });
  ASSERT_FALSE(st.ok());
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_NE(msg(st).find("storage0 (" + net.ip(0) + ":" + port + ")"), std::string::npos) << st;
  h->d->proc->wait_exit(10);
  h = host_in(tmp, net, 0, testing::tiny_model_dir(), "nso2", port);
  ASSERT_TRUE(h->wait_ready()) << h->log();
  got = greedy_with(xo, ids, 6, &st);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(got, want);
}

}  // namespace
}  // namespace k3
