// The remote listener's per-peer limits (expertd/peer_limits.h) with real
// processes, real gRPC on loopback and the real segment: one authenticated
// peer opening 64 idle streams gets --remote-max-streams-per-peer of them
// (the rest RESOURCE_EXHAUSTED naming the flag) and no more client slots;
// a second peer (its connections from 127.0.0.2, through a relay) and a
// local engined still get in; the total stays within --remote-max-streams,
// leaving the other client slots to local attachers; the slots of a peer
// that lets go come back; idle streams are closed after
// --remote-idle-timeout-s (and engined reconnects); bad limits are refused
// at start.
#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "engined/model/model.h"
#include "shared/checkpoint/model_config.h"
#include "shared/experts/expert_compute.h"
#include "shared/experts/shm_source.h"
#include "shared/rpc/credentials.h"
#include "shared/shm/layout.h"
#include "shared/shm/segment.h"
#include "tests/expertd/remote_harness.h"

namespace k3 {
namespace {

namespace pb = k3serve::v1;
using testing::TempDir;
using namespace expertd_test;
using Clock = std::chrono::steady_clock;

// Waits (generously: the machine is loaded) until pred() holds.
bool eventually(const std::function<bool()>& pred, double seconds = 60) {
  const auto until = Clock::now() + std::chrono::duration<double>(seconds);
  while (!pred()) {
    if (Clock::now() > until) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

// Client areas of the segment that are taken (any client: remote streams
// and local attachers alike).
int slots_in_use(const std::string& segment) {
  auto s = shm::Segment::open(segment);
  if (!s.ok()) {
    ADD_FAILURE() << s.status();
    return -1;
  }
  const shm::ClientArea* areas = shm::clients_of(s->base());
  int n = 0;
  for (uint32_t c = 0; c < shm::kMaxClients; ++c)
    n += areas[c].state.load() != static_cast<uint32_t>(shm::ClientState::kFree);
  return n;
}

// A TCP relay on 127.0.0.1 whose connections to `target` come from
// 127.0.0.2: what the listener sees as another peer (all of 127/8 is this
// host's loopback).
class Relay {
 public:
  explicit Relay(const std::string& target_host_port) {
    const size_t colon = target_host_port.rfind(':');
    target_port_ = std::stoi(target_host_port.substr(colon + 1));
    listen_fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    if (::bind(listen_fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0 ||
        ::listen(listen_fd_, 16) != 0 ||
        ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0) {
      ADD_FAILURE() << "relay: cannot listen: " << std::strerror(errno);
      return;
    }
    address_ = "127.0.0.1:" + std::to_string(ntohs(a.sin_port));
    accept_thread_ = std::thread([this] { accept_loop(); });
  }
  ~Relay() {
    stop_ = true;
    ::shutdown(listen_fd_, SHUT_RDWR);
    if (accept_thread_.joinable()) accept_thread_.join();
    for (std::thread& t : pumps_) t.join();
    ::close(listen_fd_);
  }
  const std::string& address() const { return address_; }

 private:
  void accept_loop() {
    for (;;) {
      const int in = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
      if (in < 0) return;  // shut down
      const int out = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
      sockaddr_in src{}, dst{};
      src.sin_family = dst.sin_family = AF_INET;
      ::inet_pton(AF_INET, "127.0.0.2", &src.sin_addr);
      ::inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
      dst.sin_port = htons(static_cast<uint16_t>(target_port_));
      if (::bind(out, reinterpret_cast<sockaddr*>(&src), sizeof(src)) != 0 ||
          ::connect(out, reinterpret_cast<sockaddr*>(&dst), sizeof(dst)) != 0) {
        ADD_FAILURE() << "relay: cannot connect from 127.0.0.2: " << std::strerror(errno);
        ::close(in);
        ::close(out);
        continue;
      }
      pumps_.emplace_back([this, in, out] { pump(in, out); });
    }
  }
  // Copies bytes both ways until either side closes or the relay stops.
  void pump(int a, int b) {
    char buf[64 << 10];
    pollfd p[2] = {{a, POLLIN, 0}, {b, POLLIN, 0}};
    while (!stop_) {
      if (::poll(p, 2, 100) <= 0) continue;
      bool done = false;
      for (int i = 0; i < 2 && !done; ++i) {
        if (!(p[i].revents & (POLLIN | POLLHUP | POLLERR))) continue;
        const ssize_t n = ::read(p[i].fd, buf, sizeof(buf));
        if (n <= 0) {
          done = true;
          break;
        }
        for (ssize_t off = 0; off < n;) {
          const ssize_t w = ::write(p[1 - i].fd, buf + off, static_cast<size_t>(n - off));
          if (w <= 0) {
            done = true;
            break;
          }
          off += w;
        }
      }
      if (done) break;
    }
    ::close(a);
    ::close(b);
  }

  int listen_fd_ = -1, target_port_ = 0;
  std::string address_;
  std::atomic<bool> stop_{false};
  std::thread accept_thread_;
  std::vector<std::thread> pumps_;  // only the accept thread adds, until joined
};

// `n` Experts streams of one peer (one channel: one connection) that never
// send a request: what held every client slot of the segment. Each stream's
// end (its status) is recorded by its own reader thread.
class IdleStreams {
 public:
  // Plaintext without a token unless `creds` and `token` are given.
  IdleStreams(const std::string& address, int n,
              std::shared_ptr<grpc::ChannelCredentials> creds = grpc::InsecureChannelCredentials(),
              const std::string& token = "") {
    channel_ = grpc::CreateChannel(address, creds);
    stub_ = pb::RemoteExpertService::NewStub(channel_);
    for (int i = 0; i < n; ++i) {
      auto s = std::make_unique<One>();
      if (!token.empty()) s->ctx.AddMetadata(rpc::kAuthMetadataKey, rpc::bearer(token));
      s->stream = stub_->Experts(&s->ctx);
      One* p = s.get();
      s->reader = std::thread([this, p] {
        pb::ExpertStreamReply r;
        while (p->stream->Read(&r)) {
        }
        const grpc::Status st = p->stream->Finish();
        std::lock_guard<std::mutex> lk(mu_);
        p->status = st;
        p->ended = true;
        ++ended_;
      });
      streams_.push_back(std::move(s));
    }
  }
  ~IdleStreams() { close(); }
  // Cancels every stream still open and waits for their ends.
  void close() {
    for (auto& s : streams_) s->ctx.TryCancel();
    for (auto& s : streams_)
      if (s->reader.joinable()) s->reader.join();
  }
  int ended() const {
    std::lock_guard<std::mutex> lk(mu_);
    return ended_;
  }
  // The streams that ended with `code`, and one of their messages.
  int ended_with(grpc::StatusCode code, std::string* message = nullptr) const {
    std::lock_guard<std::mutex> lk(mu_);
    int n = 0;
    for (const auto& s : streams_)
      if (s->ended && s->status.error_code() == code) {
        ++n;
        if (message) *message = s->status.error_message();
      }
    return n;
  }

 private:
  struct One {
    grpc::ClientContext ctx;
    std::unique_ptr<grpc::ClientReaderWriter<pb::ExpertStreamRequest, pb::ExpertStreamReply>>
        stream;
    std::thread reader;
    grpc::Status status;
    bool ended = false;
  };
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<pb::RemoteExpertService::Stub> stub_;
  std::vector<std::unique_ptr<One>> streams_;
  mutable std::mutex mu_;
  int ended_ = 0;
};

std::vector<int32_t> ids8() {
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  return prompt(8, static_cast<int32_t>(c->vocab_size));
}

// Mutual TLS and the token, as deployed: certificates from `k3ctl certs`
// (one client certificate for every compute node).
struct Secure {
  std::string certs, token_file;
  const std::string token = "peer-limits-token";
  explicit Secure(const TempDir& tmp) : certs(tmp.file("certs")), token_file(tmp.file("token")) {
    auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "certs", "--out", certs});
    EXPECT_EQ(r.exit_code, 0) << r.err;
    testing::write_file(token_file, token + "\n");
    ::chmod(token_file.c_str(), 0600);
  }
  std::vector<std::string> expertd_flags() const {
    return {"--tls-cert", certs + "/server.pem", "--tls-key",         certs + "/server.key",
            "--tls-ca",   certs + "/ca.pem",     "--auth-token-file", token_file};
  }
  std::shared_ptr<grpc::ChannelCredentials> client() const {
    rpc::TlsFiles f;
    f.ca = certs + "/ca.pem";
    f.cert = certs + "/client.pem";
    f.key = certs + "/client.key";
    auto c = rpc::client_tls_credentials(f);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *c : grpc::InsecureChannelCredentials();
  }
};

// The finding: one authenticated peer's 64 idle streams took every client
// slot and a local engined could not attach. Now the peer gets its share
// (default 4), the rest are refused naming the flag, a second peer (another
// address, the same client certificate) and a local engined still get in,
// and the first peer's slots come back when it lets go.
TEST(RemotePeerLimits, OnePeerCannotTakeEveryClientSlot) {
  TempDir tmp;
  const Secure sec(tmp);
  RemoteExpertd h(tmp, "rpeer", sec.expertd_flags(), testing::tiny_model_dir());
  ASSERT_TRUE(h.wait_ready()) << h.log();
  const int all = static_cast<int>(shm::kMaxClients);
  const int share = 4;  // --remote-max-streams-per-peer's default
  auto a = std::make_unique<IdleStreams>(h.address, all, sec.client(), sec.token);
  // Every stream is either holding a slot or refused.
  ASSERT_TRUE(eventually([&] { return slots_in_use(h.d->segment) + a->ended() >= all; }))
      << "slots " << slots_in_use(h.d->segment) << ", ended " << a->ended() << "\n"
      << h.log();
  EXPECT_EQ(slots_in_use(h.d->segment), share);
  std::string why;
  EXPECT_EQ(a->ended_with(grpc::StatusCode::RESOURCE_EXHAUSTED, &why), all - share);
  EXPECT_NE(why.find("--remote-max-streams-per-peer"), std::string::npos) << why;
  EXPECT_NE(why.find("127.0.0.1"), std::string::npos) << why;
  EXPECT_NE(h.log().find("--remote-max-streams-per-peer"), std::string::npos) << h.log();

  // A second peer gets its own share.
  Relay relay(h.address);
  IdleStreams b(relay.address(), all, sec.client(), sec.token);
  ASSERT_TRUE(eventually([&] { return slots_in_use(h.d->segment) + b.ended() >= all + share; }))
      << "slots " << slots_in_use(h.d->segment) << ", ended " << b.ended() << "\n"
      << h.log();
  EXPECT_EQ(slots_in_use(h.d->segment), 2 * share);
  EXPECT_EQ(b.ended_with(grpc::StatusCode::RESOURCE_EXHAUSTED, &why), all - share);
  EXPECT_NE(why.find("127.0.0.2"), std::string::npos) << why;

  // A local engined attaches and computes, bit-identical to standalone.
  const auto ids = ids8();
  Status st;
  const auto got = score({h.d->segment}, ids, &st);
  ASSERT_TRUE(st.ok()) << st;
  const auto want = score_standalone(ids);
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);

  // The first peer lets go: its slots come back, and it gets its share again.
  a->close();
  a.reset();
  ASSERT_TRUE(eventually([&] { return slots_in_use(h.d->segment) == share; }))
      << "slots " << slots_in_use(h.d->segment);
  IdleStreams again(h.address, share, sec.client(), sec.token);
  ASSERT_TRUE(eventually([&] { return slots_in_use(h.d->segment) + again.ended() >= 2 * share; }));
  EXPECT_EQ(slots_in_use(h.d->segment), 2 * share);
  EXPECT_EQ(again.ended(), 0);
}

// --remote-max-streams caps all peers together: the remaining client slots
// stay free for local attachers whatever the peers do.
TEST(RemotePeerLimits, TotalCapLeavesTheOtherSlotsToLocalClients) {
  TempDir tmp;
  RemoteExpertd h(
      tmp, "rpeer-total",
      {"--insecure-remote", "--remote-max-streams", "6", "--remote-max-streams-per-peer", "4"},
      testing::tiny_model_dir());
  ASSERT_TRUE(h.wait_ready()) << h.log();
  IdleStreams a(h.address, 10);
  ASSERT_TRUE(eventually([&] { return slots_in_use(h.d->segment) + a.ended() >= 10; }));
  Relay relay(h.address);
  IdleStreams b(relay.address(), 10);
  // a holds 4, b 2; b's other 8 are refused.
  ASSERT_TRUE(eventually([&] { return slots_in_use(h.d->segment) + b.ended() >= 4 + 10; }));
  EXPECT_EQ(slots_in_use(h.d->segment), 6);
  std::string why;
  EXPECT_EQ(b.ended_with(grpc::StatusCode::RESOURCE_EXHAUSTED, &why), 8);
  EXPECT_NE(why.find("--remote-max-streams "), std::string::npos) << why;
  // Local clients take every slot the remote cap leaves.
  experts::ShmSourceOptions so;
  so.segment = h.d->segment;
  so.fingerprint = std::stoull(h.describe().model_fingerprint(), nullptr, 16);
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  const auto shape = experts::ExpertShape::of(*c);
  std::vector<std::unique_ptr<experts::ShmExpertSource>> locals;
  Status st;
  for (uint32_t i = 0; i + 6 < shm::kMaxClients; ++i) {
    auto src = experts::ShmExpertSource::create(so, shape);
    if (!src.ok()) {
      st = src.status();
      break;
    }
    locals.push_back(std::move(*src));
  }
  EXPECT_EQ(locals.size(), shm::kMaxClients - 6) << st;
}

// --remote-idle-timeout-s: a stream that asks nothing for that long is
// closed and its slot freed; engined's source reconnects on its next step
// and computes the same logits.
TEST(RemotePeerLimits, IdleStreamsAreClosedAndEnginedReconnects) {
  TempDir tmp;
  RemoteExpertd h(tmp, "rpeer-idle", {"--insecure-remote", "--remote-idle-timeout-s", "2"},
                  testing::tiny_model_dir());
  ASSERT_TRUE(h.wait_ready()) << h.log();
  auto closed = [&] {
    const std::string log = h.log();
    int n = 0;
    for (size_t at = 0; (at = log.find("closed an idle remote stream", at)) != std::string::npos;
         ++at)
      ++n;
    return n;
  };
  IdleStreams a(h.address, 2);
  ASSERT_TRUE(eventually([&] { return a.ended() == 2; })) << h.log();
  EXPECT_EQ(a.ended_with(grpc::StatusCode::CANCELLED), 2);
  EXPECT_TRUE(eventually([&] { return slots_in_use(h.d->segment) == 0; }))
      << slots_in_use(h.d->segment);
  EXPECT_TRUE(eventually([&] { return closed() == 2; })) << h.log();
  EXPECT_NE(h.log().find("(--remote-idle-timeout-s)"), std::string::npos) << h.log();

  // engined's source: a step, its stream closed while idle, a step again.
  auto m = engined::Model::load(testing::tiny_model_dir(), {}, engined::EngineOptions{});
  ASSERT_TRUE(m.ok()) << m.status();
  auto experts = engined::make_expert_source(insecure_hosts({{"h1", h.address}}), **m);
  ASSERT_TRUE(experts.ok()) << experts.status();
  const auto ids = ids8();
  std::vector<float> first, second;
  auto seq = (*m)->new_sequence();
  Status st = (*m)->forward(**experts, *seq, ids, static_cast<int64_t>(ids.size()), &first);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_TRUE(eventually([&] { return closed() == 3; })) << h.log();
  // Once engined has seen its stream end (a step sent in between would
  // fail over like a lost host's).
  ASSERT_TRUE(eventually([&] {
    std::vector<experts::RemoteHostStats> hs;
    (*experts)->remote_host_stats(&hs);
    return hs.size() == 1 && !hs[0].up;
  }));
  seq = (*m)->new_sequence();
  st = (*m)->forward(**experts, *seq, ids, static_cast<int64_t>(ids.size()), &second);
  ASSERT_TRUE(st.ok()) << st;
  ASSERT_EQ(first.size(), second.size());
  EXPECT_EQ(std::memcmp(first.data(), second.data(), first.size() * 4), 0);
  EXPECT_EQ(h.stats().remote_streams(), 4u);  // 2 idle, engined's first and its reconnection
}

// The limits are flags and config keys alike, checked at start (exit 2,
// naming the flag) before anything is opened.
TEST(RemotePeerLimits, BadLimitsAreRefusedAtStart) {
  TempDir tmp;
  const std::string expertd = testing::bin_dir() + "/expertd";
  const std::vector<std::string> base = {expertd, "--model", testing::tiny_model_dir(), "--listen",
                                         "unix:" + tmp.file("x.sock")};
  auto with = [&](std::vector<std::string> extra) {
    std::vector<std::string> argv = base;
    argv.insert(argv.end(), extra.begin(), extra.end());
    return testing::run_command(argv);
  };
  auto r =
      with({"--remote-listen", "127.0.0.1:0", "--insecure-remote", "--remote-max-streams", "57"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--remote-max-streams 57 is outside [1, 56]"), std::string::npos) << r.err;
  r = with({"--remote-listen", "127.0.0.1:0", "--insecure-remote", "--remote-max-streams", "8",
            "--remote-max-streams-per-peer", "9"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--remote-max-streams-per-peer 9 is outside [1, 8]"), std::string::npos)
      << r.err;
  r = with({"--remote-idle-timeout-s", "30"});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--remote-idle-timeout-s needs --remote-listen"), std::string::npos)
      << r.err;
  // The config file's keys are the flags' names.
  testing::write_file(tmp.file("c.json"),
                      R"({"remote_listen": "127.0.0.1:0", "insecure_remote": true,
                          "remote_idle_timeout_s": -5})");
  r = with({"--config", tmp.file("c.json")});
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_NE(r.err.find("--remote-idle-timeout-s -5 is outside [0, 86400]"), std::string::npos)
      << r.err;
}

}  // namespace
}  // namespace k3
