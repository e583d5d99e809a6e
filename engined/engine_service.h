// engined's gRPC control service: a thin adapter over EngineLoop (requests,
// placement, counters) and the model's description.
#pragma once

#include "engined/serving/constraint_compiler.h"
#include "engined/serving/engine_loop.h"
#include "k3serve/v1/engine.grpc.pb.h"

namespace k3::engined {

// Thread-safe (the loop is).
class EngineServiceImpl final : public k3serve::v1::EngineService::Service {
 public:
  // `constraints` compiles the requests' output constraints (null: refused).
  EngineServiceImpl(engined::EngineLoop* loop,
                    std::shared_ptr<engined::ConstraintCompiler> constraints = nullptr)
      : loop_(loop), constraints_(std::move(constraints)) {}

  grpc::Status Health(grpc::ServerContext*, const k3serve::v1::HealthRequest*,
                      k3serve::v1::HealthResponse* out) override;
  grpc::Status Describe(grpc::ServerContext*, const k3serve::v1::EngineDescribeRequest*,
                        k3serve::v1::EngineDescribeResponse* out) override;
  // Streams the request's events: started, progress while the prompt is
  // read (GenerateProgress), tokens, finished. A cancelled call (client
  // gone, deadline) cancels the request in the loop: the call looks between
  // events and at least every 50 ms, and the loop stops within the piece in
  // flight (RequestHandle::cancel).
  grpc::Status Generate(grpc::ServerContext* ctx, const k3serve::v1::GenerateRequest* req,
                        grpc::ServerWriter<k3serve::v1::GenerateEvent>* writer) override;
  grpc::Status Stats(grpc::ServerContext*, const k3serve::v1::EngineStatsRequest*,
                     k3serve::v1::EngineStatsResponse* out) override;
  grpc::Status SetPlacement(grpc::ServerContext*, const k3serve::v1::Placement* req,
                            k3serve::v1::PlacementAck* out) override;

 private:
  engined::EngineLoop* loop_;
  std::shared_ptr<engined::ConstraintCompiler> constraints_;
};

}  // namespace k3::engined
