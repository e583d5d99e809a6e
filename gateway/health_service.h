// The gateway's public gRPC service. This stage answers Health only; the chat
// and completion APIs arrive with the gateway issue.
#pragma once

#include "k3serve/v1/gateway.grpc.pb.h"

namespace k3::gateway {

class GatewayServiceImpl final : public k3serve::v1::Gateway::Service {
 public:
  grpc::Status Health(grpc::ServerContext*, const k3serve::v1::HealthRequest*,
                      k3serve::v1::HealthResponse* out) override;
};

}  // namespace k3::gateway
