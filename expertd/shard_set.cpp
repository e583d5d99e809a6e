#include "expertd/shard_set.h"

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

}  // namespace k3::expertd
