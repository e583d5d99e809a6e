// The gateway's core pieces without a network: admission (bound, order,
// deadline, cancellation), stop strings over streamed text, the topology
// file, listen addresses.
#include <gtest/gtest.h>

#include <atomic>
#include <thread>

#include "gateway/core/admission.h"
#include "gateway/core/config.h"
#include "gateway/core/stop_matcher.h"
#include "gateway/core/topology.h"

namespace k3::gateway {
namespace {

using Clock = std::chrono::steady_clock;
Clock::time_point in(double s) {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

TEST(Admission, RunsUpToTheSlotsQueuesUpToTheBoundRefusesTheRest) {
  AdmissionQueue q(2, 1);
  auto a = q.enter(in(10), nullptr);
  auto b = q.enter(in(10), nullptr);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(q.running(), 2);
  std::atomic<bool> c_in{false};
  std::thread waiter([&] {
    auto c = q.enter(in(30), nullptr);
    ASSERT_TRUE(c.ok()) << c.status();
    c_in = true;
  });
  while (q.waiting() != 1) std::this_thread::yield();
  auto d = q.enter(in(10), nullptr);
  EXPECT_EQ(d.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(d.status().message().find("busy"), std::string::npos);
  EXPECT_FALSE(c_in);
  a->release();
  waiter.join();
  EXPECT_TRUE(c_in);
  EXPECT_EQ(q.waiting(), 0);
}

TEST(Admission, ServesWaitersInArrivalOrder) {
  AdmissionQueue q(1, 8);
  auto first = q.enter(in(10), nullptr);
  ASSERT_TRUE(first.ok());
  std::mutex mu;
  std::vector<int> order;
  std::vector<std::thread> ts;
  for (int i = 0; i < 4; ++i) {
    ts.emplace_back([&, i] {
      auto t = q.enter(in(30), nullptr);
      ASSERT_TRUE(t.ok());
      std::lock_guard<std::mutex> lk(mu);
      order.push_back(i);
    });
    while (q.waiting() != i + 1) std::this_thread::yield();  // arrive in order
  }
  first->release();
  for (auto& t : ts) t.join();
  EXPECT_EQ(order, (std::vector<int>{0, 1, 2, 3}));
}

TEST(Admission, DeadlineAndCancellationLeaveTheLine) {
  AdmissionQueue q(1, 8);
  auto held = q.enter(in(10), nullptr);
  ASSERT_TRUE(held.ok());
  auto late = q.enter(in(0.3), nullptr);
  EXPECT_EQ(late.status().code(), absl::StatusCode::kDeadlineExceeded);
  std::atomic<bool> alive{true};
  std::thread gone([&] {
    auto t = q.enter(in(30), [&] { return alive.load(); });
    EXPECT_EQ(t.status().code(), absl::StatusCode::kCancelled);
  });
  // A later arrival must not be stuck behind the two that left.
  std::atomic<bool> next_in{false};
  while (q.waiting() != 1) std::this_thread::yield();
  std::thread next([&] {
    auto t = q.enter(in(30), nullptr);
    EXPECT_TRUE(t.ok());
    next_in = true;
  });
  while (q.waiting() != 2) std::this_thread::yield();
  alive = false;
  gone.join();
  held->release();
  next.join();
  EXPECT_TRUE(next_in);
  EXPECT_EQ(q.running(), 0);
}

std::string feed_all(StopMatcher& m, const std::vector<std::string>& pieces, bool* stopped) {
  std::string out;
  for (const auto& p : pieces) {
    out += m.feed(p, stopped);
    if (*stopped) return out;
  }
  return out + m.flush();
}

TEST(StopMatcher, StopsBeforeAStopStringSplitAcrossPieces) {
  StopMatcher m({"END", "\n\n"});
  bool stopped = false;
  EXPECT_EQ(feed_all(m, {"hello E", "N", "D and more"}, &stopped), "hello ");
  EXPECT_TRUE(stopped);
  StopMatcher m2({"\n\n"});
  EXPECT_EQ(feed_all(m2, {"a\n", "b\n", "\nc"}, &stopped), "a\nb");
  EXPECT_TRUE(stopped);
}

TEST(StopMatcher, ReleasesHeldTextThatTurnsOutNotToStop) {
  StopMatcher m({"stop"});
  bool stopped = false;
  EXPECT_EQ(m.feed("to st", &stopped), "to ");
  EXPECT_EQ(m.feed("ar", &stopped), "star");
  EXPECT_EQ(m.feed("s", &stopped), "");  // "s" may start "stop"
  EXPECT_EQ(m.feed(" st", &stopped), "s ");
  EXPECT_EQ(m.flush(), "st");
  EXPECT_FALSE(stopped);
  StopMatcher none({});
  EXPECT_EQ(none.feed("anything", &stopped), "anything");
}

TEST(Topology, ParsesEntriesAndNamesWhatIsWrong) {
  auto t = parse_topology(R"({"expertd":[{"name":"a","address":"unix:/x"},{"address":"h:1"}]})",
                          "topo.json");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->expertd.size(), 2u);
  EXPECT_EQ(t->expertd[1].name, "h:1");
  EXPECT_EQ(t->expertd[0].segment, "");
  EXPECT_TRUE(t->remote_expertd.empty());
  // An expertd with --segment-dir: its DIR/NAME path, checked against Describe.
  auto p = parse_topology(R"({"expertd":[{"address":"unix:/x","segment":"/mnt/huge/k3-nvme0"}]})",
                          "topo.json");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->expertd[0].segment, "/mnt/huge/k3-nvme0");
  struct Bad {
    const char* text;
    const char* says;
  };
  for (const Bad& b : {Bad{"{", "not valid JSON"}, Bad{"[]", "expected"},
                       Bad{R"({"expertd":[{"name":"a"}]})", "expertd[0].address"},
                       Bad{R"({"expertd":[1]})", "expertd[0] must be an object"},
                       Bad{R"({"expertd":[{"address":"a"},{"address":"a"}]})", "repeats"},
                       Bad{R"({"expertd":[{"address":"a","segment":"x/../y"}]})", ".segment"},
                       Bad{R"({"expertd":[{"address":"a","segment":7}]})", ".segment"},
                       Bad{R"({"expertd":[{"address":"a","segmnet":"x"}]})",
                           "expertd[0]: unknown field \"segmnet\""},
                       Bad{R"({"expertd":[],"remote":[]})", "unknown field \"remote\""}}) {
    auto r = parse_topology(b.text, "topo.json");
    ASSERT_FALSE(r.ok()) << b.text;
    EXPECT_NE(r.status().message().find(b.says), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("topo.json"), std::string::npos);
  }
}

TEST(Topology, RemoteHostsAreCheckedFieldByField) {
  auto t = parse_topology(R"({"expertd": [{"name": "nvme0", "address": "unix:/x"}],
    "remote_expertd": [
      {"name": "storage0", "address": "10.0.0.2:7070", "tls_ca": "/etc/k3serve/ca.pem",
       "tls_cert": "/etc/k3serve/engined.pem", "tls_key": "/etc/k3serve/engined.key",
       "auth_token_file": "/etc/k3serve/remote.token"},
      {"address": "127.0.0.1:7071", "insecure": true}]})",
                          "topo.json");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->remote_expertd.size(), 2u);
  const RemoteExpertdEntry& a = t->remote_expertd[0];
  EXPECT_EQ(a.name, "storage0");
  EXPECT_EQ(a.address, "10.0.0.2:7070");
  EXPECT_EQ(a.tls_ca, "/etc/k3serve/ca.pem");
  EXPECT_EQ(a.tls_cert, "/etc/k3serve/engined.pem");
  EXPECT_EQ(a.tls_key, "/etc/k3serve/engined.key");
  EXPECT_EQ(a.auth_token_file, "/etc/k3serve/remote.token");
  EXPECT_FALSE(a.insecure);
  EXPECT_EQ(t->remote_expertd[1].name, "127.0.0.1:7071");
  EXPECT_TRUE(t->remote_expertd[1].insecure);
  // Remote hosts alone are a topology too.
  auto only = parse_topology(R"({"remote_expertd": [{"name": "s", "address": "h:1",
    "insecure": true}]})",
                             "topo.json");
  ASSERT_TRUE(only.ok()) << only.status();
  EXPECT_TRUE(only->expertd.empty());
  struct Bad {
    const char* entry;
    const char* says;
  };
  for (const Bad& b : {
           Bad{R"(7)", "remote_expertd[0] must be an object"},
           Bad{R"({"name": "s"})", "remote_expertd[0].address is required"},
           Bad{R"({"address": 5, "insecure": true})", ".address must be a non-empty string"},
           Bad{R"({"address": "nohost", "insecure": true})", ".address 'nohost' is not HOST:PORT"},
           Bad{R"({"address": "h:0", "insecure": true})", "is not HOST:PORT"},
           Bad{R"({"address": "h:70000", "insecure": true})", "is not HOST:PORT"},
           Bad{R"({"address": "unix:/run/x.sock", "insecure": true})", "is not HOST:PORT"},
           Bad{R"({"name": "a b", "address": "h:1", "insecure": true})", ".name 'a b'"},
           Bad{R"({"name": "a=b", "address": "h:1", "insecure": true})", ".name 'a=b'"},
           Bad{R"({"address": "h:1"})", ".tls_ca is required"},
           Bad{R"({"address": "h:1", "tls_ca": "/ca.pem"})", ".auth_token_file is required"},
           Bad{R"({"address": "h:1", "tls_ca": "ca.pem", "auth_token_file": "/t"})",
               ".tls_ca must be an absolute path"},
           Bad{R"({"address": "h:1", "tls_ca": "/ca.pem", "auth_token_file": "t"})",
               ".auth_token_file must be an absolute path"},
           Bad{R"({"address": "h:1", "tls_ca": "/c", "auth_token_file": "/t", "tls_cert": "/p"})",
               "tls_cert and tls_key go together"},
           Bad{R"({"address": "h:1", "tls_ca": "/ca.pem", "insecure": true})",
               "insecure and tls_* exclude each other"},
           Bad{R"({"address": "h:1", "insecure": "yes"})", ".insecure must be true or false"},
           Bad{R"({"address": "h:1", "insecure": true, "replicas": 2})",
               "unknown field \"replicas\""},
           Bad{R"({"address": "h:1", "tls_ca": "", "auth_token_file": "/t"})",
               ".tls_ca must be a non-empty string"},
       }) {
    const std::string text = std::string(R"({"remote_expertd": [)") + b.entry + "]}";
    auto r = parse_topology(text, "topo.json");
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_NE(r.status().message().find(b.says), std::string::npos) << r.status() << " " << text;
    EXPECT_NE(r.status().message().find("topo.json"), std::string::npos);
  }
  // Names and addresses are distinct across both lists.
  for (const Bad& b : {Bad{R"({"remote_expertd": [{"name": "a", "address": "h:1", "insecure": true},
                               {"name": "a", "address": "h:2", "insecure": true}]})",
                           "remote_expertd[1] repeats"},
                       Bad{R"({"remote_expertd": [{"name": "a", "address": "h:1", "insecure": true},
                               {"name": "b", "address": "h:1", "insecure": true}]})",
                           "remote_expertd[1] repeats"},
                       Bad{R"({"expertd": [{"name": "a", "address": "unix:/x"}],
            "remote_expertd": [{"name": "a", "address": "h:1", "insecure": true}]})",
                           "remote_expertd[0].name 'a' names an expertd"}}) {
    auto r = parse_topology(b.entry, "topo.json");
    ASSERT_FALSE(r.ok()) << b.entry;
    EXPECT_NE(r.status().message().find(b.says), std::string::npos) << r.status();
  }
}

TEST(Config, SplitsHostAndPort) {
  auto a = split_host_port("127.0.0.1:8080");
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->first, "127.0.0.1");
  EXPECT_EQ(a->second, 8080);
  auto b = split_host_port("[::1]:0");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->first, "::1");
  for (const char* bad : {"8080", "host:", ":80", "h:70000", "h:8x", "unix:/run/x.sock"})
    EXPECT_FALSE(split_host_port(bad).ok()) << bad;
}

TEST(Config, RefusesLimitsThatCannotWork) {
  auto check = [](auto change, std::string_view needle) {
    GatewayConfig c;
    c.model_dir = "/m";
    change(c);
    const Status s = c.validate();
    EXPECT_FALSE(s.ok()) << needle;
    EXPECT_NE(msg(s).find(needle), std::string::npos) << msg(s);
  };
  check([](GatewayConfig& c) { c.http_threads = 64; }, "--http-threads (64) must be more than");
  check([](GatewayConfig& c) { c.max_header_bytes = 10; }, "--max-header-bytes");
  check([](GatewayConfig& c) { c.header_timeout_s = 0; }, "--header-timeout-s");
  check([](GatewayConfig& c) { c.max_connections = 0; }, "--max-connections");
  check([](GatewayConfig& c) { c.tls_cert = "c.pem"; }, "--tls-cert and --tls-key go together");
  check([](GatewayConfig& c) { c.cors_origin = "a\r\nSet-Cookie: x"; }, "--cors-origin");
  GatewayConfig ok;
  ok.model_dir = "/m";
  EXPECT_TRUE(ok.validate().ok());
}

}  // namespace
}  // namespace k3::gateway
