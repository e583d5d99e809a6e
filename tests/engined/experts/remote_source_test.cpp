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

#include "k3serve/v1/expert.grpc.pb.h"
#include "shared/base/hash.h"
#include "shared/checkpoint/manifest.h"

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
  // The real model's decode step on one host: 16 experts of 17,547,264 B.
  EXPECT_EQ(remote_step_allowance(o, 17547264, 16).count(), 10000 + 5615);
  EXPECT_EQ(remote_step_allowance(o, 17547264, 0).count(), 10000);
  // A prefill chunk asking for all 896 experts of a layer gets minutes.
  EXPECT_EQ(remote_step_allowance(o, 17547264, 896).count(), 10000 + 314446);
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
