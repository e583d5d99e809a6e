// engined's control service. This stage answers Health only; scoring and
// generation arrive with the engine issue.
#pragma once

#include "k3serve/v1/engine.grpc.pb.h"

namespace k3::engined {

class EngineServiceImpl final : public k3serve::v1::EngineService::Service {
 public:
  grpc::Status Health(grpc::ServerContext*, const k3serve::v1::HealthRequest*,
                      k3serve::v1::HealthResponse* out) override;
};

}  // namespace k3::engined
