#include "expertd/shard_set.h"

#include "absl/strings/str_join.h"

namespace k3::expertd {

StatusOr<std::unique_ptr<ShardSet>> ShardSet::open(const std::string& model_dir,
                                                   const std::vector<std::string>& extra_dirs) {
  auto s = std::make_unique<ShardSet>();
  K3_ASSIGN_OR_RETURN(s->config_, checkpoint::load_model_config(model_dir));
  // A drive owns its shards: whatever the index names that is not in these
  // directories is simply not served here.
  K3_ASSIGN_OR_RETURN(s->ck_, checkpoint::Checkpoint::open(model_dir, extra_dirs,
                                                           checkpoint::ShardPolicy::kPresent));
  K3_RETURN_IF_ERROR(
      checkpoint::validate_checkpoint(*s->ck_, s->config_, checkpoint::Required::kNothing));
  K3_ASSIGN_OR_RETURN(s->index_,
                      checkpoint::ExpertIndex::build(*s->ck_, s->config_, /*partial=*/true));
  if (s->index_.present_count() == 0)
    return absl::FailedPreconditionError(
        cat("the shards in ", model_dir,
            extra_dirs.empty() ? std::string() : cat(", ", absl::StrJoin(extra_dirs, ", ")),
            " hold no routed expert of the model"));
  s->dirs_.push_back(model_dir);
  s->dirs_.insert(s->dirs_.end(), extra_dirs.begin(), extra_dirs.end());
  return s;
}

}  // namespace k3::expertd
