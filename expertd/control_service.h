// expertd's control service (ExpertService in proto/k3serve/v1/expert.proto:
// Health, Describe, Stats), on its --listen address: a thin adapter over the
// shard set, the segment server's stats and the remote listener's.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "expertd/shard_set.h"
#include "k3serve/v1/expert.grpc.pb.h"

namespace k3::expertd {

class SegmentServer;
class RemoteListener;

class ControlService final : public k3serve::v1::ExpertService::Service {
 public:
  // `server` may be null (no data plane: Describe and Health only).
  ControlService(const ShardSet& shards, const SegmentServer* server)
      : shards_(shards), server_(server) {}
  // The remote listener whose state Describe and Stats report (or null).
  void set_remote(const RemoteListener* remote) { remote_ = remote; }
  grpc::Status Health(grpc::ServerContext*, const k3serve::v1::HealthRequest*,
                      k3serve::v1::HealthResponse* out) override;
  grpc::Status Describe(grpc::ServerContext*, const k3serve::v1::DescribeRequest*,
                        k3serve::v1::DescribeResponse* out) override;
  grpc::Status Stats(grpc::ServerContext*, const k3serve::v1::StatsRequest*,
                     k3serve::v1::StatsResponse* out) override;

 private:
  const ShardSet& shards_;
  const SegmentServer* server_;
  const RemoteListener* remote_ = nullptr;
};

}  // namespace k3::expertd
