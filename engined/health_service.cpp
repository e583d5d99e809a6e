#include "engined/health_service.h"

#include "shared/version.h"

namespace k3::engined {

grpc::Status EngineServiceImpl::Health(grpc::ServerContext*, const k3serve::v1::HealthRequest*,
                                       k3serve::v1::HealthResponse* out) {
  out->set_status(k3serve::v1::HealthResponse::SERVING);
  out->set_component("engined");
  out->set_version(kVersion);
  return grpc::Status::OK;
}

}  // namespace k3::engined
