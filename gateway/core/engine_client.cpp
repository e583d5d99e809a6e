#include "gateway/core/engine_client.h"

#include "shared/rpc/server.h"

namespace k3::gateway {

namespace v1 = k3serve::v1;

Status from_grpc(const grpc::Status& s, std::string_view what, bool answered) {
  if (s.ok()) return absl::OkStatus();
  std::string m = s.error_message();
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE && !answered)
    m = cat(what, " is unavailable: ", m);
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED)
    m = cat("request deadline passed while waiting for ", what);
  return Status(static_cast<absl::StatusCode>(s.error_code()), m);
}

namespace {

void set_deadline(grpc::ClientContext& ctx, int timeout_ms) {
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms));
}

}  // namespace

EngineClient::EngineClient(const std::string& address)
    : address_(address),
      channel_(grpc::CreateChannel(address, grpc::InsecureChannelCredentials())),
      stub_(v1::EngineService::NewStub(channel_)) {}

StatusOr<v1::EngineDescribeResponse> EngineClient::describe(int timeout_ms) {
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout_ms);
  v1::EngineDescribeResponse out;
  grpc::Status s = stub_->Describe(&ctx, v1::EngineDescribeRequest(), &out);
  if (!s.ok()) return from_grpc(s, cat("engined at ", address_));
  return out;
}

StatusOr<v1::EngineStatsResponse> EngineClient::stats(int timeout_ms) {
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout_ms);
  v1::EngineStatsResponse out;
  grpc::Status s = stub_->Stats(&ctx, v1::EngineStatsRequest(), &out);
  if (!s.ok()) return from_grpc(s, cat("engined at ", address_));
  return out;
}

Status EngineClient::set_placement(const v1::Placement& placement, int timeout_ms,
                                   uint64_t* acked) {
  grpc::ClientContext ctx;
  set_deadline(ctx, timeout_ms);
  v1::PlacementAck ack;
  Status s = from_grpc(stub_->SetPlacement(&ctx, placement, &ack), cat("engined at ", address_));
  if (acked != nullptr) *acked = ack.version();
  return s;
}

StatusOr<std::unique_ptr<GenerateStream>> EngineClient::generate(
    const v1::GenerateRequest& request, std::chrono::system_clock::time_point deadline) {
  auto stream = std::unique_ptr<GenerateStream>(new GenerateStream());
  stream->ctx_.set_deadline(deadline);
  auto reader = stub_->Generate(&stream->ctx_, request);
  GenerateStream* raw = stream.get();
  raw->reader_ =
      std::thread([raw, r = std::move(reader)]() mutable { raw->read_all(std::move(r)); });
  return stream;
}

void GenerateStream::read_all(std::unique_ptr<grpc::ClientReader<v1::GenerateEvent>> reader) {
  v1::GenerateEvent e;
  while (reader->Read(&e)) {
    {
      std::lock_guard<std::mutex> lk(mu_);
      events_.push_back(e);
    }
    cv_.notify_all();
  }
  grpc::Status s = reader->Finish();
  const auto& trailers = ctx_.GetServerTrailingMetadata();
  const bool answered = trailers.find(rpc::kAnsweredByKey) != trailers.end();
  {
    std::lock_guard<std::mutex> lk(mu_);
    status_ = from_grpc(s, "engined", answered);
    done_ = true;
  }
  cv_.notify_all();
}

bool GenerateStream::next(v1::GenerateEvent* out, int timeout_ms, bool* finished, Status* status) {
  std::unique_lock<std::mutex> lk(mu_);
  cv_.wait_for(lk, std::chrono::milliseconds(timeout_ms),
               [&] { return !events_.empty() || done_; });
  *finished = false;
  if (!events_.empty()) {
    *out = std::move(events_.front());
    events_.pop_front();
    return true;
  }
  if (done_) {
    *finished = true;
    *status = status_;
  }
  return false;
}

void GenerateStream::cancel() {
  ctx_.TryCancel();
}

GenerateStream::~GenerateStream() {
  ctx_.TryCancel();
  if (reader_.joinable()) reader_.join();
}

}  // namespace k3::gateway
