// expertd's gRPC control service: a thin adapter over the shard index.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "k3serve/v1/expert.grpc.pb.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/expert_index.h"
#include "shared/checkpoint/model_config.h"

namespace k3::expertd {

// What one expertd instance owns: its shard directories, opened and indexed.
// Immutable after open(); thread-safe.
class ShardSet {
 public:
  static StatusOr<std::unique_ptr<ShardSet>> open(const std::string& model_dir,
                                                  const std::vector<std::string>& extra_dirs);
  const ModelConfig& config() const { return config_; }
  const Checkpoint& checkpoint() const { return *ck_; }
  const ExpertIndex& index() const { return index_; }
  std::vector<std::string> dirs() const { return dirs_; }

 private:
  ModelConfig config_;
  std::unique_ptr<Checkpoint> ck_;
  ExpertIndex index_;
  std::vector<std::string> dirs_;
};

class ExpertServer;

class ExpertServiceImpl final : public k3serve::v1::ExpertService::Service {
 public:
  // `server` may be null (no data plane: Describe and Health only).
  ExpertServiceImpl(const ShardSet& shards, const ExpertServer* server)
      : shards_(shards), server_(server) {}
  grpc::Status Health(grpc::ServerContext*, const k3serve::v1::HealthRequest*,
                      k3serve::v1::HealthResponse* out) override;
  grpc::Status Describe(grpc::ServerContext*, const k3serve::v1::DescribeRequest*,
                        k3serve::v1::DescribeResponse* out) override;
  grpc::Status Stats(grpc::ServerContext*, const k3serve::v1::StatsRequest*,
                     k3serve::v1::StatsResponse* out) override;

 private:
  const ShardSet& shards_;
  const ExpertServer* server_;
};

}  // namespace k3::expertd
