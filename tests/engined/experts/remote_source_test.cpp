// engined's reader of a remote expertd against a hostile host: what a host
// sends that engined never asked for ends its stream as a protocol error
// instead of being queued (it used to be held, unbounded, until the next
// step drained it: 8 x 64 MB took an idle engined from 43 MB to 777 MB).
#include "engined/experts/remote_source.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "k3serve/v1/expert.grpc.pb.h"
#include "shared/base/hash.h"
#include "shared/checkpoint/manifest.h"
#include "shared/experts/remote_protocol.h"

namespace k3::engined {
namespace {

namespace pb = k3serve::v1;
using Stream = grpc::ServerReaderWriter<pb::ExpertStreamReply, pb::ExpertStreamRequest>;

constexpr uint64_t kFingerprint = 0x1234abcd5678ef00ull;

experts::ExpertShape shape() {
  experts::ExpertShape s;
  s.num_layers = 2;
  s.first_moe_layer = 1;
  s.num_experts = 8;
  s.latent = 32;
  s.intermediate = 32;
  s.bytes = 4096;
  return s;
}

// Describes itself as a host of the test's model (every expert of layer 1),
// then runs `on_stream` on each Experts stream.
class HostileHost final : public pb::RemoteExpertService::Service {
 public:
  std::function<void(grpc::ServerContext*, Stream*)> on_stream;

  grpc::Status Describe(grpc::ServerContext*, const pb::DescribeRequest*,
                        pb::DescribeResponse* d) override {
    d->set_model_fingerprint(base::hex64(kFingerprint));
    d->set_expert_bytes(shape().bytes);
    pb::ServedLayer* l = d->add_layers();
    l->set_layer(1);
    l->set_experts(std::string(1, '\xff'));
    l->set_expert_count(8);
    return grpc::Status::OK;
  }
  grpc::Status Experts(grpc::ServerContext* ctx, Stream* stream) override {
    on_stream(ctx, stream);
    return grpc::Status::OK;
  }
};

struct Host {
  HostileHost service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  void start() {
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.SetMaxSendMessageSize(512 << 20);
    b.RegisterService(&service);
    server = b.BuildAndStart();
    ASSERT_NE(server, nullptr);
  }
  ~Host() {
    if (server) server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  }
};

RemoteSourceOptions options(int port) {
  RemoteSourceOptions o;
  o.name = "hostile";
  o.address = "127.0.0.1:" + std::to_string(port);
  o.insecure = true;
  o.fingerprint = kFingerprint;
  o.deadline_ms = 20000;
  o.bytes_mode = true;
  return o;
}

pb::ExpertStreamReply big_reply(uint64_t step) {
  pb::ExpertStreamReply r;
  r.set_step(step);
  r.set_index(0);
  r.set_offset(0);
  r.set_total_bytes(shape().bytes);
  r.set_data(std::string(64u << 20, 'x'));
  return r;
}

TEST(RemoteSource, UnsolicitedRepliesOfAnIdleEngineEndTheStream) {
  Host host;
  std::atomic<int> written{0};
  std::atomic<bool> streamed{false};
  host.service.on_stream = [&](grpc::ServerContext* ctx, Stream* s) {
    if (streamed.exchange(true)) return;  // a reconnection: left alone
    const pb::ExpertStreamReply r = big_reply(7);
    for (int i = 0; i < 8 && !ctx->IsCancelled(); ++i) {
      if (!s->Write(r)) break;
      ++written;
    }
  };
  host.start();
  auto src = RemoteExpertSource::create(options(host.port), shape());
  ASSERT_TRUE(src.ok()) << src.status();
  // The host's flood ends when engined cancels the stream.
  for (int i = 0; i < 600 && !(*src)->stats().network_bytes; ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::this_thread::sleep_for(std::chrono::seconds(2));
  EXPECT_LT(written.load(), 8) << "engined read the whole flood";
  EXPECT_LE((*src)->stats().network_bytes, 3ull * (64u << 20));
  // The host is reported down, with the protocol error.
  std::vector<experts::RemoteHostStats> hosts;
  (*src)->remote_host_stats(&hosts);
  ASSERT_EQ(hosts.size(), 1u);
  EXPECT_FALSE(hosts[0].up);
  EXPECT_FALSE((*src)->owns(1, 3));
}

TEST(RemoteSource, AReplyToAStepNeverAskedFailsTheStepNamingIt) {
  Host host;
  host.service.on_stream = [&](grpc::ServerContext*, Stream* s) {
    pb::ExpertStreamRequest req;
    while (s->Read(&req)) {
      pb::ExpertStreamReply r;
      r.set_step(req.step() + 5);
      r.set_index(0);
      r.set_offset(0);
      r.set_total_bytes(shape().bytes);
      r.set_data(std::string(shape().bytes, 'y'));
      if (!s->Write(r)) return;
    }
  };
  host.start();
  auto src = RemoteExpertSource::create(options(host.port), shape());
  ASSERT_TRUE(src.ok()) << src.status();
  experts::ExpertRequest r;
  r.layer = 1;
  r.work.push_back({3, false, {}});
  ASSERT_TRUE((*src)->submit(r).ok());
  auto c = (*src)->poll(20000);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("protocol error: sent a reply to step 6, which was never "
                                      "asked"),
            std::string::npos)
      << c.status();
}

TEST(RemoteSource, AStepsDeadlineIsABasePlusItsBytesAtTheMinimumRate) {
  RemoteSourceOptions o;
  o.deadline_ms = 10000;
  o.min_mbps = 50;
  experts::ExpertShape real;
  real.latent = 3072;
  real.intermediate = 3584;
  real.bytes = 17547264;
  // The real model's decode step on one host, experts fetched as bytes:
  // 16 experts of 17,547,264 B.
  EXPECT_EQ(remote_step_allowance(o, real, 16, 0).count(), 10000 + 5615);
  EXPECT_EQ(remote_step_allowance(o, real, 0, 0).count(), 10000);
  // A prefill chunk asking for all 896 experts of a layer gets minutes.
  EXPECT_EQ(remote_step_allowance(o, real, 896, 0).count(), 10000 + 314446);
}

// Computing there, each row the host computes adds its compute at
// kRemoteMinComputeGmacs (3 x 3072 x 3584 multiply-adds on the real model)
// and its activations out and result back at min_mbps: a big prefill chunk's
// step of 32 experts x 73 rows is not cut at the bytes' deadline.
TEST(RemoteSource, AStepsDeadlineGrowsWithTheRowsTheHostComputes) {
  RemoteSourceOptions o;
  o.deadline_ms = 10000;
  o.min_mbps = 50;
  experts::ExpertShape real;
  real.latent = 3072;
  real.intermediate = 3584;
  real.bytes = 17547264;
  EXPECT_EQ(expert_macs_per_row(real), 33030144u);
  // A decode step, 16 experts x 1 row: 5,615.1 ms for the bytes, 7.9 for
  // the rows' 24,576 B each, 528.5 for their compute.
  EXPECT_EQ(remote_step_allowance(o, real, 16, 16).count(), 16151);
  // 32 experts x 73 rows: 11,230.2 + 1,148.2 ms moved, 77,158.4 computed.
  EXPECT_EQ(remote_step_allowance(o, real, 32, 32 * 73).count(), 99536);
  // More rows, more time, by each row's share.
  const int64_t a = remote_step_allowance(o, real, 32, 1000).count();
  const int64_t b = remote_step_allowance(o, real, 32, 2000).count();
  EXPECT_GT(b, a);
  EXPECT_NEAR(static_cast<double>(b - a), 1000 * (33.030144 + 0.49152), 1.0);
  // A whole layer of a 4,096-token chunk (every token's 16 experts) gets
  // about 42 minutes, under the 24-hour cap; and the cap holds.
  EXPECT_LT(remote_step_allowance(o, real, 896, 4096 * 16).count(), 86400000);
  EXPECT_EQ(remote_step_allowance(o, real, 896, size_t{1} << 40).count(), 86400000);
}

// A host that answers a little at a time, never silent for long: the
// deadline runs from when the step went out, so it is given up at the
// deadline (it used to be reset by every reply: 1-byte chunks every 10 ms
// kept one token running for over 10 minutes).
TEST(RemoteSource, AHostTricklingItsAnswerMissesTheStepsDeadline) {
  Host host;
  host.service.on_stream = [&](grpc::ServerContext* ctx, Stream* s) {
    pb::ExpertStreamRequest req;
    while (s->Read(&req)) {
      if (req.work_size() == 0) continue;
      // 64-byte chunks every 50 ms: the 4096-byte expert takes 3.2 s.
      for (uint64_t off = 0; off < shape().bytes && !ctx->IsCancelled(); off += 64) {
        pb::ExpertStreamReply r;
        r.set_step(req.step());
        r.set_index(0);
        r.set_offset(off);
        r.set_total_bytes(shape().bytes);
        r.set_data(std::string(64, '\x11'));
        if (!s->Write(r)) return;
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
      }
    }
  };
  host.start();
  RemoteSourceOptions o = options(host.port);
  o.deadline_ms = 1000;
  o.min_mbps = 1;  // + 4 ms for the step's 4096 bytes
  auto src = RemoteExpertSource::create(o, shape());
  ASSERT_TRUE(src.ok()) << src.status();
  experts::ExpertRequest r;
  r.layer = 1;
  r.work.push_back({3, false, {}});
  ASSERT_TRUE((*src)->submit(r).ok());
  auto c = (*src)->poll(20000);
  ASSERT_FALSE(c.ok()) << "the trickled expert was waited for to its end";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(c.status().message().find("layer 1's 1 of 1 expert(s) not answered within 1004 ms"),
            std::string::npos)
      << c.status();
}

// A model whose expert rows cost 3 x 4096 x 4096 = 50,331,648 multiply-adds:
// 32 rows add 1,610.6 ms at kRemoteMinComputeGmacs.
experts::ExpertShape wide_shape() {
  experts::ExpertShape s = shape();
  s.latent = 4096;
  s.intermediate = 4096;
  return s;
}

// A compute step of one expert over `rows` token rows (int8 activations).
struct ComputeStep {
  std::vector<int8_t> q;
  std::vector<float> q_scales;
  experts::ExpertActivations act;
  experts::ExpertRequest req;
  ComputeStep(const experts::ExpertShape& s, int64_t rows) {
    q.assign(static_cast<size_t>(rows * s.latent), 1);
    q_scales.assign(static_cast<size_t>(rows * s.latent / 32), 0.5f);
    act.tokens = rows;
    act.int8 = true;
    act.q = q.data();
    act.q_scales = q_scales.data();
    req.layer = 1;
    req.activations = &act;
    experts::ExpertWork w;
    w.expert = 3;
    w.compute = true;
    for (int64_t t = 0; t < rows; ++t) w.rows.push_back(t);
    req.work.push_back(std::move(w));
  }
};

// A host that computes (answers each compute step's rows, zeros) after
// `delay`, or never when `hangs`; it records the mode of what it was asked.
void serve_rows_after(Host* host, const experts::ExpertShape& s, std::chrono::milliseconds delay,
                      bool hangs, std::atomic<int>* compute_steps) {
  host->service.on_stream = [=](grpc::ServerContext* ctx, Stream* st) {
    pb::ExpertStreamRequest req;
    while (st->Read(&req)) {
      if (req.work_size() == 0 || req.mode() != pb::EXPERT_MODE_COMPUTE) continue;
      ++*compute_steps;
      const auto until = std::chrono::steady_clock::now() + delay;
      while ((hangs || std::chrono::steady_clock::now() < until) && !ctx->IsCancelled())
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
      if (ctx->IsCancelled()) return;
      pb::ExpertStreamReply r;
      r.set_step(req.step());
      r.set_index(0);
      r.set_rows(std::string(req.work(0).rows_size() * s.latent * sizeof(float), '\0'));
      if (!st->Write(r)) return;
    }
  };
}

RemoteSourceOptions compute_options(int port) {
  RemoteSourceOptions o = options(port);
  o.bytes_mode = false;
  o.deadline_ms = 500;
  o.min_mbps = 1e6;  // the bytes add nothing measurable: the rows' compute is the point
  return o;
}

// A slow but healthy host computing a big step answers after the base
// deadline (500 ms) and within the rows' allowance (2,110 ms): it is waited
// for. Before the allowance counted rows, it was given up at 500 ms.
TEST(RemoteSource, AHostComputingManyRowsSlowlyIsWaitedFor) {
  const experts::ExpertShape s = wide_shape();
  Host host;
  std::atomic<int> steps{0};
  serve_rows_after(&host, s, std::chrono::milliseconds(1200), /*hangs=*/false, &steps);
  host.start();
  const RemoteSourceOptions o = compute_options(host.port);
  ASSERT_EQ(remote_step_allowance(o, s, 1, 32).count(), 2110);
  auto src = RemoteExpertSource::create(o, s);
  ASSERT_TRUE(src.ok()) << src.status();
  ComputeStep step(s, 32);
  ASSERT_TRUE((*src)->submit(step.req).ok());
  auto c = (*src)->poll(20000);
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_TRUE(c->has_value());
  EXPECT_EQ((*c)->rows.size(), static_cast<size_t>(32 * s.latent));
  EXPECT_EQ(steps.load(), 1);
}

// A hung host is still given up, at the rows' allowance and not later, and
// the message names every term of it.
TEST(RemoteSource, AHungHostComputingManyRowsIsGivenUpAtTheRowsDeadline) {
  const experts::ExpertShape s = wide_shape();
  Host host;
  std::atomic<int> steps{0};
  serve_rows_after(&host, s, std::chrono::milliseconds(0), /*hangs=*/true, &steps);
  host.start();
  auto src = RemoteExpertSource::create(compute_options(host.port), s);
  ASSERT_TRUE(src.ok()) << src.status();
  ComputeStep step(s, 32);
  const auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE((*src)->submit(step.req).ok());
  auto c = (*src)->poll(60000);
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_FALSE(c.ok()) << "a hung host was waited for past its deadline";
  EXPECT_EQ(c.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_GE(waited, 2.1);
  EXPECT_LT(waited, 10.0);
  EXPECT_NE(c.status().message().find("layer 1's 1 of 1 expert(s) not answered within 2110 ms "
                                      "(--remote-deadline-ms 500 + 1 x 4096 B and 32 row(s) x "
                                      "32768 B at --remote-min-mbps 1e+06 + 32 row(s) x 50331648 "
                                      "multiply-adds at 1 G/s;"),
            std::string::npos)
      << c.status();
}

// A layer step of more tokens than a host receives (kMaxChunkTokens: its
// receive cap) would be refused whole; it fetches the expert's bytes and
// computes the rows here instead.
TEST(RemoteSource, AStepOfMoreTokensThanAHostReceivesFetchesTheBytes) {
  Host host;
  std::atomic<int> compute_steps{0}, bytes_steps{0};
  host.service.on_stream = [&](grpc::ServerContext*, Stream* st) {
    pb::ExpertStreamRequest req;
    while (st->Read(&req)) {
      if (req.work_size() == 0) continue;
      if (req.mode() == pb::EXPERT_MODE_COMPUTE) {
        ++compute_steps;
        pb::ExpertStreamReply r;
        r.set_step(req.step());
        r.set_index(0);
        r.set_rows(std::string(req.work(0).rows_size() * shape().latent * sizeof(float), '\0'));
        if (!st->Write(r)) return;
        continue;
      }
      ++bytes_steps;
      EXPECT_EQ(req.tokens(), 0u);
      EXPECT_TRUE(req.q().empty());
      pb::ExpertStreamReply r;
      r.set_step(req.step());
      r.set_index(0);
      r.set_offset(0);
      r.set_total_bytes(shape().bytes);
      r.set_data(std::string(shape().bytes, '\x11'));
      if (!st->Write(r)) return;
    }
  };
  host.start();
  RemoteSourceOptions o = options(host.port);
  o.bytes_mode = false;
  auto src = RemoteExpertSource::create(o, shape());
  ASSERT_TRUE(src.ok()) << src.status();
  for (const int64_t tokens : {experts::kMaxChunkTokens, experts::kMaxChunkTokens + 1}) {
    ComputeStep step(shape(), tokens);
    ASSERT_TRUE((*src)->submit(step.req).ok());
    auto c = (*src)->poll(20000);
    ASSERT_TRUE(c.ok()) << c.status();
    ASSERT_TRUE(c->has_value());
    EXPECT_EQ((*c)->rows.size(), static_cast<size_t>(tokens * shape().latent));
  }
  EXPECT_EQ(compute_steps.load(), 1);  // kMaxChunkTokens tokens: computed there
  EXPECT_EQ(bytes_steps.load(), 1);    // one more: the bytes, computed here
}

// Bytes mode with engined's own manifest: a host that alters an expert's
// bytes, keeping their size, is caught; the true bytes pass.
std::shared_ptr<const checkpoint::Manifest> manifest_of(char fill) {
  const std::string bytes(shape().bytes, fill);
  checkpoint::ManifestEntry e;
  e.kind = checkpoint::ManifestEntry::Kind::kExpert;
  e.name = "model.layers.1.block_sparse_moe.experts.3";
  e.layer = 1;
  e.id = 3;
  e.bytes = bytes.size();
  e.hash = base::xxh3_128(bytes.data(), bytes.size());
  auto m = checkpoint::Manifest::parse(checkpoint::manifest_header_line({kFingerprint, 1}) + "\n" +
                                           checkpoint::manifest_entry_line(e) + "\n",
                                       "test manifest");
  EXPECT_TRUE(m.ok()) << m.status();
  return std::make_shared<const checkpoint::Manifest>(std::move(*m));
}

StatusOr<std::optional<experts::ExpertCompletion>> fetch_from_a_host_sending(
    char fill, std::shared_ptr<const checkpoint::Manifest> manifest) {
  Host host;
  host.service.on_stream = [&](grpc::ServerContext*, Stream* s) {
    pb::ExpertStreamRequest req;
    while (s->Read(&req)) {
      if (req.work_size() == 0) continue;
      pb::ExpertStreamReply r;
      r.set_step(req.step());
      r.set_index(0);
      r.set_offset(0);
      r.set_total_bytes(shape().bytes);
      r.set_data(std::string(shape().bytes, fill));
      if (!s->Write(r)) return;
    }
  };
  host.start();
  RemoteSourceOptions o = options(host.port);
  o.manifest = std::move(manifest);
  auto src = RemoteExpertSource::create(o, shape());
  if (!src.ok()) return src.status();
  experts::ExpertRequest r;
  r.layer = 1;
  r.work.push_back({3, false, {}});
  K3_RETURN_IF_ERROR((*src)->submit(r));
  auto c = (*src)->poll(20000);
  const experts::ExpertSourceStats st = (*src)->stats();
  EXPECT_EQ(st.verified_reads, 1u);
  EXPECT_EQ(st.manifest_mismatches, c.ok() ? 0u : 1u);
  return c;
}

TEST(RemoteSource, BytesAlteredByAHostFailTheManifestCheck) {
  auto bad = fetch_from_a_host_sending('y', manifest_of('x'));
  ASSERT_FALSE(bad.ok()) << "altered bytes were believed";
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kUnavailable);
  EXPECT_NE(bad.status().message().find("remote expertd hostile"), std::string::npos)
      << bad.status();
  EXPECT_NE(bad.status().message().find("expert 3 of layer 1 (from remote expertd hostile"),
            std::string::npos)
      << bad.status();
  EXPECT_NE(bad.status().message().find("fails the manifest check"), std::string::npos)
      << bad.status();

  auto good = fetch_from_a_host_sending('x', manifest_of('x'));
  ASSERT_TRUE(good.ok()) << good.status();
  ASSERT_TRUE(good->has_value());
}

}  // namespace
}  // namespace k3::engined
