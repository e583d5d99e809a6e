// The public gRPC API (k3serve.v1.Gateway): a thin adapter over GatewayCore,
// the same work as the HTTP API with protos instead of JSON.
#pragma once

#include "gateway/core/gateway_core.h"
#include "gateway/grpc/deadline_watchdog.h"
#include "k3serve/v1/gateway.grpc.pb.h"
#include "shared/rpc/token_gate.h"

namespace k3::gateway {

// Thread-safe.
class GrpcApi final : public k3serve::v1::Gateway::Service {
 public:
  explicit GrpcApi(GatewayCore* core) : core_(core) {}

  grpc::Status Health(grpc::ServerContext*, const k3serve::v1::HealthRequest*,
                      k3serve::v1::HealthResponse* out) override;
  grpc::Status ListModels(grpc::ServerContext* ctx, const k3serve::v1::ListModelsRequest*,
                          k3serve::v1::ListModelsResponse* out) override;
  grpc::Status Tokenize(grpc::ServerContext* ctx, const k3serve::v1::TokenizeRequest* req,
                        k3serve::v1::TokenizeResponse* out) override;
  grpc::Status Detokenize(grpc::ServerContext* ctx, const k3serve::v1::DetokenizeRequest* req,
                          k3serve::v1::DetokenizeResponse* out) override;
  grpc::Status Chat(grpc::ServerContext* ctx, const k3serve::v1::ChatRequest* req,
                    grpc::ServerWriter<k3serve::v1::ChatEvent>* writer) override;
  grpc::Status Complete(grpc::ServerContext* ctx, const k3serve::v1::CompleteRequest* req,
                        grpc::ServerWriter<k3serve::v1::CompleteEvent>* writer) override;

  // The API-key check for the server's options (rpc::ServerOptions::gate):
  // a call without a configured key is refused on its metadata, before its
  // message is read; Health stays open. Null when keys are off.
  std::shared_ptr<const rpc::TokenGate> token_gate() const;

 private:
  // UNAUTHENTICATED unless the call carries a configured key (when keys are on).
  Status authenticate(const grpc::ServerContext* ctx) const;
  GatewayCore* core_;
  DeadlineWatchdog watchdog_;
};

}  // namespace k3::gateway
