#include "expertd/remote_server.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <mutex>
#include <set>

#include <grpcpp/grpcpp.h>

#include "engined/experts/expert_compute.h"
#include "engined/experts/shm_source.h"
#include "expertd/expert_server.h"
#include "expertd/expert_service.h"
#include "k3serve/v1/expert.grpc.pb.h"
#include "shared/base/cpu_features.h"
#include "shared/base/log.h"
#include "shared/rpc/server.h"

namespace k3::expertd {

namespace pb = k3serve::v1;

namespace {

constexpr int kMaxMessageBytes = 512 << 20;  // a long prefill chunk's activations
constexpr uint64_t kChunkBytes = 1u << 20;   // bytes mode: one reply's data
constexpr uint32_t kMaxTokens = 1u << 20;    // activation rows in one request

// Bytes of a message on the wire: its serialized size plus gRPC's 5-byte
// length prefix.
uint64_t wire_bytes(const google::protobuf::Message& m) {
  return m.ByteSizeLong() + 5;
}

}  // namespace

class RemoteService final : public pb::RemoteExpertService::Service {
 public:
  RemoteService(const ShardSet& shards, const ExpertServer& data, ExpertServiceImpl& control,
                const RemoteOptions& opt)
      : shards_(shards),
        data_(data),
        control_(control),
        opt_(opt),
        shape_(engine::ExpertShape::of(shards.config())) {
    char fp[17];
    std::snprintf(fp, sizeof fp, "%016llx",
                  static_cast<unsigned long long>(shards.checkpoint().fingerprint()));
    fingerprint_ = fp;
  }

  grpc::Status Health(grpc::ServerContext* ctx, const pb::HealthRequest* req,
                      pb::HealthResponse* out) override {
    if (grpc::Status s = auth(ctx, "Health"); !s.ok()) return s;
    return control_.Health(ctx, req, out);
  }
  grpc::Status Describe(grpc::ServerContext* ctx, const pb::DescribeRequest* req,
                        pb::DescribeResponse* out) override {
    if (grpc::Status s = auth(ctx, "Describe"); !s.ok()) return s;
    return control_.Describe(ctx, req, out);
  }
  grpc::Status Stats(grpc::ServerContext* ctx, const pb::StatsRequest* req,
                     pb::StatsResponse* out) override {
    if (grpc::Status s = auth(ctx, "Stats"); !s.ok()) return s;
    return control_.Stats(ctx, req, out);
  }

  grpc::Status Experts(
      grpc::ServerContext* ctx,
      grpc::ServerReaderWriter<pb::ExpertStreamReply, pb::ExpertStreamRequest>* stream) override {
    if (grpc::Status s = auth(ctx, "Experts"); !s.ok()) return s;
    bump(&RemoteStats::streams);
    engine::ShmSourceOptions so;
    so.segment = data_.segment_name();
    so.fingerprint = shards_.checkpoint().fingerprint();
    auto src = engine::ShmExpertSource::create(so, shape_);
    if (!src.ok()) {
      log_->error("remote stream from {}: cannot attach to the segment: {}", ctx->peer(),
                  msg(src.status()));
      return grpc::Status(grpc::StatusCode::UNAVAILABLE,
                          cat("expertd cannot serve: ", msg(src.status())));
    }
    log_->info("remote stream from {} opened", ctx->peer());
    pb::ExpertStreamRequest req;
    while (stream->Read(&req)) {
      bump(&RemoteStats::requests);
      bump(&RemoteStats::bytes_in, wire_bytes(req));
      Status s = handle(req, **src, stream);
      if (!s.ok()) {
        if (s.code() != absl::StatusCode::kCancelled) {
          bump(&RemoteStats::refused);
          log_->warn("remote stream from {}: step {} of layer {} refused: {}", ctx->peer(),
                     req.step(), req.layer(), msg(s));
        }
        return rpc::to_grpc(s);
      }
    }
    log_->info("remote stream from {} closed", ctx->peer());
    return grpc::Status::OK;
  }

  RemoteStats stats() const {
    std::lock_guard<std::mutex> lk(mu_);
    return st_;
  }

 private:
  void bump(uint64_t RemoteStats::*field, uint64_t n = 1) {
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
    bump(&RemoteStats::refused);
    const char* why = it == md.end() ? "no auth token" : "a wrong auth token";
    log_->warn("refused {} from {}: {}", method, ctx->peer(), why);
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        cat("expertd refused the call: ", why, " (see --auth-token-file)"));
  }

  using Stream = grpc::ServerReaderWriter<pb::ExpertStreamReply, pb::ExpertStreamRequest>;

  Status write(Stream* stream, const pb::ExpertStreamReply& r) {
    if (!stream->Write(r)) return absl::CancelledError("the client went away");
    bump(&RemoteStats::replies);
    bump(&RemoteStats::bytes_out, wire_bytes(r));
    return absl::OkStatus();
  }

  Status handle(const pb::ExpertStreamRequest& req, engine::ExpertSource& src, Stream* stream) {
    if (req.model_fingerprint() != fingerprint_)
      return absl::FailedPreconditionError(
          cat("this expertd serves model ", fingerprint_, ", the request is for model ",
              req.model_fingerprint().empty() ? "(none named)" : req.model_fingerprint()));
    const int64_t layer = req.layer();
    if (layer < shape_.first_moe_layer || layer >= shape_.num_layers)
      return absl::InvalidArgumentError(cat("layer ", layer, " is not a MoE layer"));
    engine::ExpertRequest r;
    r.layer = layer;
    for (const pb::ExpertWorkItem& w : req.work()) {
      if (w.expert() >= shape_.num_experts)
        return absl::InvalidArgumentError(
            cat("expert ", w.expert(), " is outside [0, ", shape_.num_experts, ")"));
      if (!data_.serves(layer, w.expert()))
        return absl::NotFoundError(
            cat("this expertd does not serve expert ", w.expert(), " of layer ", layer));
      engine::ExpertWork wk;
      wk.expert = w.expert();
      wk.compute = req.mode() == pb::EXPERT_MODE_COMPUTE;
      if (!wk.compute && w.rows_size() != 0)
        return absl::InvalidArgumentError("token rows given outside compute mode");
      wk.rows.assign(w.rows().begin(), w.rows().end());
      r.work.push_back(std::move(wk));
    }
    switch (req.mode()) {
      case pb::EXPERT_MODE_PREFETCH:
        r.priority = engine::ExpertPriority::kSpeculative;
        return src.submit(r);
      case pb::EXPERT_MODE_BYTES:
        return bytes(req, r, src, stream);
      case pb::EXPERT_MODE_COMPUTE:
        return compute(req, r, src, stream);
      default:
        return absl::InvalidArgumentError(
            cat("unknown expert mode ", static_cast<int>(req.mode())));
    }
  }

  Status compute(const pb::ExpertStreamRequest& req, engine::ExpertRequest& r,
                 engine::ExpertSource& src, Stream* stream) {
    const std::string mine(kernel_isa_name(kernel_isa()));
    if (req.kernel_isa() != mine)
      return absl::FailedPreconditionError(
          cat("kernel variant mismatch: this expertd computes with the ", mine,
              " kernels, the request asks for '", req.kernel_isa(),
              "' (run both ends with the same K3_KERNELS for bit-identical results)"));
    const uint64_t T = req.tokens(), lat = static_cast<uint64_t>(shape_.latent);
    if (T == 0 || T > kMaxTokens)
      return absl::InvalidArgumentError(
          cat("activation rows ", T, " outside [1, ", kMaxTokens, "]"));
    // Copies: the kernels want aligned rows, protobuf's bytes promise none.
    std::vector<int8_t> q;
    std::vector<float> qs, f;
    engine::ExpertActivations act;
    act.tokens = static_cast<int64_t>(T);
    act.int8 = req.int8();
    if (req.int8()) {
      if (req.q().size() != T * lat || req.q_scales().size() != T * lat / 32 * sizeof(float) ||
          !req.f32().empty())
        return absl::InvalidArgumentError(cat("int8 activations of ", T, " rows must be ", T * lat,
                                              " bytes of q and ", T * lat / 32 * 4,
                                              " of scales (got ", req.q().size(), " and ",
                                              req.q_scales().size(), ")"));
      q.resize(T * lat);
      qs.resize(T * lat / 32);
      std::memcpy(q.data(), req.q().data(), q.size());
      std::memcpy(qs.data(), req.q_scales().data(), qs.size() * sizeof(float));
      act.q = q.data();
      act.q_scales = qs.data();
    } else {
      if (req.f32().size() != T * lat * sizeof(float) || !req.q().empty())
        return absl::InvalidArgumentError(cat("float activations of ", T, " rows must be ",
                                              T * lat * 4, " bytes (got ", req.f32().size(), ")"));
      f.resize(T * lat);
      std::memcpy(f.data(), req.f32().data(), f.size() * sizeof(float));
      act.f32 = f.data();
    }
    r.activations = &act;
    K3_RETURN_IF_ERROR(src.submit(r));
    pb::ExpertStreamReply reply;
    for (size_t n = 0; n < r.work.size(); ++n) {
      K3_ASSIGN_OR_RETURN(engine::ExpertCompletion c, src.next());
      reply.Clear();
      reply.set_step(req.step());
      reply.set_index(static_cast<uint32_t>(c.index));
      reply.set_rows(reinterpret_cast<const char*>(c.rows.data()), c.rows.size() * sizeof(float));
      bump(&RemoteStats::rows, r.work[c.index].rows.size());
      K3_RETURN_IF_ERROR(write(stream, reply));
    }
    return absl::OkStatus();
  }

  Status bytes(const pb::ExpertStreamRequest& req, engine::ExpertRequest& r,
               engine::ExpertSource& src, Stream* stream) {
    K3_RETURN_IF_ERROR(src.submit(r));
    pb::ExpertStreamReply reply;
    for (size_t n = 0; n < r.work.size(); ++n) {
      K3_ASSIGN_OR_RETURN(engine::ExpertCompletion c, src.next());
      // The bytes stay valid until the next call on the source: every chunk
      // is written (paced by the stream's flow control) before that.
      for (uint64_t off = 0; off < shape_.bytes; off += kChunkBytes) {
        const uint64_t len = std::min(kChunkBytes, shape_.bytes - off);
        reply.Clear();
        reply.set_step(req.step());
        reply.set_index(static_cast<uint32_t>(c.index));
        reply.set_offset(off);
        reply.set_total_bytes(shape_.bytes);
        reply.set_data(reinterpret_cast<const char*>(c.bytes) + off, len);
        K3_RETURN_IF_ERROR(write(stream, reply));
      }
      bump(&RemoteStats::bytes_experts);
    }
    return absl::OkStatus();
  }

  const ShardSet& shards_;
  const ExpertServer& data_;
  ExpertServiceImpl& control_;
  RemoteOptions opt_;
  engine::ExpertShape shape_;
  std::string fingerprint_;
  std::shared_ptr<spdlog::logger> log_ = logger("expertd");
  mutable std::mutex mu_;
  RemoteStats st_;
};

struct RemoteServer::Impl {
  std::unique_ptr<RemoteService> service;
  std::unique_ptr<grpc::Server> server;
  std::string address;
  bool insecure = false;
  bool stopped = false;
};

RemoteServer::RemoteServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

RemoteServer::~RemoteServer() {
  stop();
}

StatusOr<std::unique_ptr<RemoteServer>> RemoteServer::start(const ShardSet& shards,
                                                            const ExpertServer& data,
                                                            ExpertServiceImpl& control,
                                                            const RemoteOptions& opt) {
  if (opt.listen.empty() || opt.listen.rfind("unix:", 0) == 0)
    return absl::InvalidArgumentError(
        cat("--remote-listen '", opt.listen, "' must be HOST:PORT (other hosts reach it)"));
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (opt.insecure) {
    creds = grpc::InsecureServerCredentials();
  } else {
    K3_ASSIGN_OR_RETURN(creds, rpc::server_tls_credentials(opt.tls));
  }
  auto impl = std::make_unique<Impl>();
  impl->service = std::make_unique<RemoteService>(shards, data, control, opt);
  impl->insecure = opt.insecure;
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort(opt.listen, creds, &port);
  b.RegisterService(impl->service.get());
  b.SetMaxReceiveMessageSize(kMaxMessageBytes);
  b.SetMaxSendMessageSize(kMaxMessageBytes);
  impl->server = b.BuildAndStart();
  if (!impl->server || port == 0)
    return absl::UnavailableError(cat("cannot listen on --remote-listen ", opt.listen));
  impl->address = cat(opt.listen.substr(0, opt.listen.rfind(':')), ":", port);
  return std::unique_ptr<RemoteServer>(new RemoteServer(std::move(impl)));
}

void RemoteServer::stop() {
  if (impl_->stopped) return;
  impl_->stopped = true;
  impl_->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
}

const std::string& RemoteServer::address() const {
  return impl_->address;
}

bool RemoteServer::insecure() const {
  return impl_->insecure;
}

RemoteStats RemoteServer::stats() const {
  return impl_->service->stats();
}

}  // namespace k3::expertd
