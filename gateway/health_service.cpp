#include "gateway/health_service.h"

#include "shared/rpc/server.h"

namespace k3::gateway {

grpc::Status GatewayServiceImpl::Health(grpc::ServerContext*, const k3serve::v1::HealthRequest*,
                                        k3serve::v1::HealthResponse* out) {
  rpc::fill_health("gateway", out);
  return grpc::Status::OK;
}

}  // namespace k3::gateway
