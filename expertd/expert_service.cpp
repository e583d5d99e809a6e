#include "expertd/expert_service.h"

#include <cstdio>

#include "shared/version.h"

namespace k3::expertd {

StatusOr<std::unique_ptr<ShardSet>> ShardSet::open(const std::string& model_dir,
                                                   const std::vector<std::string>& extra_dirs) {
  auto s = std::make_unique<ShardSet>();
  K3_ASSIGN_OR_RETURN(s->config_, load_model_config(model_dir));
  K3_ASSIGN_OR_RETURN(s->ck_, Checkpoint::open(model_dir, extra_dirs));
  K3_RETURN_IF_ERROR(validate_checkpoint(*s->ck_, s->config_));
  K3_ASSIGN_OR_RETURN(s->index_, ExpertIndex::build(*s->ck_, s->config_));
  s->dirs_.push_back(model_dir);
  s->dirs_.insert(s->dirs_.end(), extra_dirs.begin(), extra_dirs.end());
  return s;
}

grpc::Status ExpertServiceImpl::Health(grpc::ServerContext*, const k3serve::v1::HealthRequest*,
                                       k3serve::v1::HealthResponse* out) {
  out->set_status(k3serve::v1::HealthResponse::SERVING);
  out->set_component("expertd");
  out->set_version(kVersion);
  return grpc::Status::OK;
}

grpc::Status ExpertServiceImpl::Describe(grpc::ServerContext*, const k3serve::v1::DescribeRequest*,
                                         k3serve::v1::DescribeResponse* out) {
  char fp[17];
  std::snprintf(fp, sizeof fp, "%016llx",
                static_cast<unsigned long long>(shards_.checkpoint().fingerprint()));
  out->set_model_fingerprint(fp);
  const ModelConfig& c = shards_.config();
  for (int64_t l = c.first_k_dense_replace; l < c.num_hidden_layers; ++l) {
    auto* layer = out->add_layers();
    layer->set_layer(static_cast<uint32_t>(l));
    layer->set_expert_count(static_cast<uint32_t>(c.num_experts));
  }
  out->set_expert_bytes(shards_.index().expert_bytes());
  for (const auto& d : shards_.dirs()) out->add_shard_dirs(d);
  return grpc::Status::OK;
}

}  // namespace k3::expertd
