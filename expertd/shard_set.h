// What one expertd instance owns: the shard files present in its
// directories (a drive owns its shards; the model's config and index are
// every host's), opened, validated and indexed: which experts they hold and
// where.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/expert_index.h"
#include "shared/checkpoint/model_config.h"

namespace k3::expertd {

// Immutable after open(); thread-safe.
class ShardSet {
 public:
  static StatusOr<std::unique_ptr<ShardSet>> open(const std::string& model_dir,
                                                  const std::vector<std::string>& extra_dirs);
  const k3::checkpoint::ModelConfig& config() const { return config_; }
  const k3::checkpoint::Checkpoint& checkpoint() const { return *ck_; }
  const k3::checkpoint::ExpertIndex& index() const { return index_; }
  // Whether its shards hold that expert.
  bool owns(int64_t layer, int64_t expert) const { return index_.present(layer, expert); }
  std::vector<std::string> dirs() const { return dirs_; }

 private:
  k3::checkpoint::ModelConfig config_;
  std::unique_ptr<k3::checkpoint::Checkpoint> ck_;
  k3::checkpoint::ExpertIndex index_;
  std::vector<std::string> dirs_;
};

}  // namespace k3::expertd
