#include "expertd/remote_listener.h"

#include <algorithm>
#include <chrono>
#include <mutex>

#include <grpcpp/grpcpp.h>

#include "expertd/control_service.h"
#include "expertd/segment_server.h"
#include "k3serve/v1/expert.grpc.pb.h"
#include "shared/base/cpu_features.h"
#include "shared/base/hash.h"
#include "shared/base/log.h"
#include "shared/experts/expert_compute.h"
#include "shared/experts/remote_protocol.h"
#include "shared/experts/shm_source.h"
#include "shared/rpc/server.h"
#include "shared/rpc/token_gate.h"
#include "shared/rpc/unary_cap.h"

namespace k3::expertd {

namespace pb = k3serve::v1;

namespace {

constexpr uint64_t kChunkBytes = 1u << 20;  // bytes mode: one reply's data

// Bytes of a message on the wire: its serialized size plus gRPC's 5-byte
// length prefix.
uint64_t wire_bytes(const google::protobuf::Message& m) {
  return m.ByteSizeLong() + 5;
}

}  // namespace

// RemoteExpertService (expert.proto) for the listener: converts and checks
// messages (shared/experts/remote_protocol.h) and runs each stream's work
// through this host's own segment.
class RemoteExpertsService final : public pb::RemoteExpertService::Service {
 public:
  RemoteExpertsService(const ShardSet& shards, const SegmentServer& data, ControlService& control,
                       const RemoteListenerOptions& opt)
      : shards_(shards),
        data_(data),
        control_(control),
        opt_(opt),
        shape_(experts::ExpertShape::of(shards.config())),
        limits_(opt.limits) {
    host_.shape = shape_;
    host_.fingerprint = base::hex64(shards.checkpoint().fingerprint());
    host_.kernel_isa = std::string(base::kernel_isa_name(base::kernel_isa()));
    host_.serves = [this](int64_t layer, int64_t expert) { return data_.serves(layer, expert); };
    limits_.start_idle_watch([this](const std::string& peer) {
      log_->info(
          "closed an idle remote stream of {}: no request for {} s (--remote-idle-timeout-s)", peer,
          opt_.limits.idle_timeout_s);
    });
  }

  // Health, Describe and Stats are served by start() (cap_unary), their
  // token checked by the gate.

  // The token check every call passes before its message is read (the
  // handlers' auth() stays as a second check); refusals logged and counted.
  rpc::TokenGate gate() {
    rpc::TokenGate g = rpc::bearer_token_gate(opt_.token);
    g.missing_message = "expertd refused the call: no auth token (see --auth-token-file)";
    g.wrong_message = "expertd refused the call: a wrong auth token (see --auth-token-file)";
    g.on_refused = [this](std::string_view method, bool had_token) {
      bump(&RemoteListenerStats::refused);
      log_->warn("refused {} before reading it: {}", method.substr(method.rfind('/') + 1),
                 had_token ? "a wrong auth token" : "no auth token");
    };
    return g;
  }

  grpc::Status Experts(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<pb::ExpertStreamReply, pb::ExpertStreamRequest>* stream) override {
    if (grpc::Status s = auth(ctx, "Experts"); !s.ok()) return s;
    // Admitted before it takes a client slot of the segment; released after
    // the slot (declared before `src`).
    auto admitted = limits_.admit(peer_identity(ctx->peer()), [ctx] { ctx->TryCancel(); });
    if (!admitted.ok()) {
      bump(&RemoteListenerStats::refused);
      log_->warn("remote stream from {}: {}", ctx->peer(), msg(admitted.status()));
      return rpc::to_grpc(admitted.status());
    }
    PeerLimits::Admission admission = std::move(*admitted);
    bump(&RemoteListenerStats::streams);
    experts::ShmSourceOptions so;
    so.segment = data_.segment_name();
    so.fingerprint = shards_.checkpoint().fingerprint();
    auto src = experts::ShmExpertSource::create(so, shape_);
    if (!src.ok()) {
      log_->error("remote stream from {}: cannot attach to the segment: {}", ctx->peer(),
                  msg(src.status()));
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          cat("expertd cannot serve: ", msg(src.status())));
    }
    log_->info("remote stream from {} opened", ctx->peer());
    pb::ExpertStreamRequest req;
    while (stream->Read(&req)) {
      bump(&RemoteListenerStats::requests);
      bump(&RemoteListenerStats::bytes_in, wire_bytes(req));
      admission.busy();
      Status s = handle(req, **src, stream);
      admission.done();
      if (!s.ok()) {
        if (s.code() != absl::StatusCode::kCancelled) {
          bump(&RemoteListenerStats::refused);
          log_->warn("remote stream from {}: step {} of layer {} refused: {}", ctx->peer(),
                     req.step(), req.layer(), msg(s));
        }
        return rpc::to_grpc(s);
      }
    }
    log_->info("remote stream from {} closed", ctx->peer());
    return grpc::Status::OK;
  }

  RemoteListenerStats stats() const {
    std::lock_guard<std::mutex> lk(mu_);
    return st_;
  }

 private:
  void bump(uint64_t RemoteListenerStats::*field, uint64_t n = 1) {
    std::lock_guard<std::mutex> lk(mu_);
    st_.*field += n;
  }

  // The shared token, when one is configured; a refusal is logged.
  grpc::Status auth(grpc::ServerContext* ctx, const char* method) {
    if (opt_.token.empty()) return grpc::Status::OK;
    const auto& md = ctx->client_metadata();
    auto it = md.find(rpc::kAuthMetadataKey);
    std::string got;
    if (it != md.end())
      got = rpc::token_of_bearer(std::string(it->second.data(), it->second.size()));
    if (!got.empty() && rpc::token_equals(got, opt_.token)) return grpc::Status::OK;
    bump(&RemoteListenerStats::refused);
    const char* why = it == md.end() ? "no auth token" : "a wrong auth token";
    log_->warn("refused {} from {}: {}", method, ctx->peer(), why);
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        cat("expertd refused the call: ", why, " (see --auth-token-file)"));
  }

  using Stream = grpc::ServerReaderWriter<pb::ExpertStreamReply, pb::ExpertStreamRequest>;

  Status write(Stream* stream, const pb::ExpertStreamReply& r) {
    if (!stream->Write(r)) return absl::CancelledError("the client went away");
    bump(&RemoteListenerStats::replies);
    bump(&RemoteListenerStats::bytes_out, wire_bytes(r));
    return absl::OkStatus();
  }

  // The checks are check_remote_request's (shared/experts/remote_protocol.h); this
  // only routes the checked request to the source and writes the replies.
  Status handle(const pb::ExpertStreamRequest& req, experts::ExpertSource& src, Stream* stream) {
    K3_ASSIGN_OR_RETURN(experts::CheckedRequest c, experts::check_remote_request(req, host_));
    const experts::ExpertRequest r = c.request();
    switch (c.mode) {
      case pb::EXPERT_MODE_PREFETCH:
        return src.submit(r);
      case pb::EXPERT_MODE_BYTES:
        return bytes(c.step, r, src, stream);
      default:
        return compute(c.step, r, src, stream);
    }
  }

  Status compute(uint64_t step, const experts::ExpertRequest& r, experts::ExpertSource& src,
                 Stream* stream) {
    K3_RETURN_IF_ERROR(src.submit(r));
    pb::ExpertStreamReply reply;
    for (size_t n = 0; n < r.work.size(); ++n) {
      K3_ASSIGN_OR_RETURN(experts::ExpertCompletion c, src.next());
      reply.Clear();
      reply.set_step(step);
      reply.set_index(static_cast<uint32_t>(c.index));
      reply.set_rows(reinterpret_cast<const char*>(c.rows.data()), c.rows.size() * sizeof(float));
      bump(&RemoteListenerStats::rows, r.work[c.index].rows.size());
      K3_RETURN_IF_ERROR(write(stream, reply));
    }
    return absl::OkStatus();
  }

  Status bytes(uint64_t step, const experts::ExpertRequest& r, experts::ExpertSource& src,
               Stream* stream) {
    K3_RETURN_IF_ERROR(src.submit(r));
    pb::ExpertStreamReply reply;
    for (size_t n = 0; n < r.work.size(); ++n) {
      K3_ASSIGN_OR_RETURN(experts::ExpertCompletion c, src.next());
      // The bytes stay valid until the next call on the source: every chunk
      // is written (paced by the stream's flow control) before that.
      for (uint64_t off = 0; off < shape_.bytes; off += kChunkBytes) {
        const uint64_t len = std::min(kChunkBytes, shape_.bytes - off);
        reply.Clear();
        reply.set_step(step);
        reply.set_index(static_cast<uint32_t>(c.index));
        reply.set_offset(off);
        reply.set_total_bytes(shape_.bytes);
        reply.set_data(reinterpret_cast<const char*>(c.bytes) + off, len);
        K3_RETURN_IF_ERROR(write(stream, reply));
      }
      bump(&RemoteListenerStats::bytes_experts);
    }
    return absl::OkStatus();
  }

  const ShardSet& shards_;
  const SegmentServer& data_;
  ControlService& control_;
  RemoteListenerOptions opt_;
  experts::ExpertShape shape_;
  experts::RemoteHostView host_;  // what requests are checked against
  std::shared_ptr<spdlog::logger> log_ = base::logger("expertd");
  mutable std::mutex mu_;
  RemoteListenerStats st_;
  PeerLimits limits_;  // last: its idle watcher stops first
};

struct RemoteListener::Impl {
  std::unique_ptr<RemoteExpertsService> service;
  std::unique_ptr<grpc::Server> server;
  std::string address;
  bool insecure = false;
  bool stopped = false;
};

RemoteListener::RemoteListener(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RemoteListener::~RemoteListener() {
  stop();
}

StatusOr<std::unique_ptr<RemoteListener>> RemoteListener::start(const ShardSet& shards,
                                                                const SegmentServer& data,
                                                                ControlService& control,
                                                                const RemoteListenerOptions& opt) {
  if (opt.listen.empty() || opt.listen.rfind("unix:", 0) == 0)
    return absl::InvalidArgumentError(
        cat("--remote-listen '", opt.listen, "' must be HOST:PORT (other hosts reach it)"));
  K3_RETURN_IF_ERROR(validate(opt.limits));
  auto impl = std::make_unique<Impl>();
  impl->service = std::make_unique<RemoteExpertsService>(shards, data, control, opt);
  impl->insecure = opt.insecure;
  rpc::ServerOptions so;
  if (!opt.insecure) so.tls = opt.tls;
  if (!opt.token.empty()) so.gate = std::make_shared<const rpc::TokenGate>(impl->service->gate());
  // One server-wide cap, the protocol's largest legitimate message for this
  // model (an Experts request of the largest prefill chunk); the small
  // methods get their own few-KB cap (gRPC's cap is per server).
  so.max_message_bytes = static_cast<int>(experts::max_remote_message_bytes(
      experts::ExpertShape::of(shards.config()), shards.config().num_experts_per_token));
  // ControlService's handlers do not use their context.
  const std::string svc = "k3serve.v1.RemoteExpertService.";
  K3_RETURN_IF_ERROR((rpc::cap_unary<pb::HealthRequest, pb::HealthResponse>(
      impl->service.get(), svc + "Health", rpc::kSmallRequestBytes,
      [&control](const auto& req, auto* out) { return control.Health(nullptr, &req, out); })));
  K3_RETURN_IF_ERROR((rpc::cap_unary<pb::DescribeRequest, pb::DescribeResponse>(
      impl->service.get(), svc + "Describe", rpc::kSmallRequestBytes,
      [&control](const auto& req, auto* out) { return control.Describe(nullptr, &req, out); })));
  K3_RETURN_IF_ERROR((rpc::cap_unary<pb::StatsRequest, pb::StatsResponse>(
      impl->service.get(), svc + "Stats", rpc::kSmallRequestBytes,
      [&control](const auto& req, auto* out) { return control.Stats(nullptr, &req, out); })));
  StatusOr<rpc::RunningServer> started = rpc::start_server(opt.listen, {impl->service.get()}, so);
  if (!started.ok())
    return Status(started.status().code(), cat("--remote-listen: ", msg(started.status())));
  impl->server = std::move(started->server);
  impl->address = started->address;
  return std::unique_ptr<RemoteListener>(new RemoteListener(std::move(impl)));
}

void RemoteListener::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

const std::string& RemoteListener::address() const {
  return impl_->address;
}

bool RemoteListener::insecure() const {
  return impl_->insecure;
}

RemoteListenerStats RemoteListener::stats() const {
  return impl_->service->stats();
}

}  // namespace k3::expertd
