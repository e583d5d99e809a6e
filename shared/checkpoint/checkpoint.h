// A safetensors checkpoint spread over one or more shard files and directories
// (several drives). Opened read-only: nothing is ever written to a model
// directory. All headers are parsed and cross-checked at open().
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "shared/base/file.h"
#include "shared/checkpoint/model_config.h"
#include "shared/checkpoint/safetensors.h"
#include "shared/status.h"

namespace k3::checkpoint {

// Which shard files named by the index a process opens. Under every policy a
// shard holding only tensors the model does not use (the vision tower and its
// projector, never read) may be missing from disk: it is listed in
// missing_unused_shards() for a warning (refused under --strict).
enum class ShardPolicy {
  kAll,      // every one present; each holding a tensor the model uses must be
  kPresent,  // those present in the directories; the others are simply not
             // there (expertd: a drive owns its shards)
  kDense,    // those holding a text-model tensor other than a routed expert's
             // (each must be present); never a shard that holds only experts
             // or only tensors the model does not use (engined with its
             // experts elsewhere)
};

// A shard the index names that is in none of the directories and holds only
// tensors the model does not use.
struct MissingShard {
  std::string shard;                 // file name, as in the index
  std::vector<std::string> tensors;  // full names the index places there, sorted
};

// Thread-safe after open(): all methods are const and use positional reads.
class Checkpoint {
 public:
  // `model_dir` holds config.json and either model.safetensors.index.json or a
  // single model.safetensors. Each shard file named by the index exists in at
  // most one of model_dir and `extra_dirs`; `policy` says which are opened.
  // The index is every host's: it names the shards of the whole model.
  static StatusOr<std::unique_ptr<Checkpoint>> open(const std::string& model_dir,
                                                    const std::vector<std::string>& extra_dirs = {},
                                                    ShardPolicy policy = ShardPolicy::kAll);

  const std::string& model_dir() const { return model_dir_; }
  // "language_model." when the checkpoint's names carry it, else "".
  const std::string& prefix() const { return prefix_; }
  const std::vector<TensorInfo>& tensors() const { return tensors_; }
  const std::vector<std::string>& files() const { return paths_; }
  // Shard names of the index not opened (absent, or under kDense holding no
  // dense tensor of the text model), sorted.
  const std::vector<std::string>& unopened_shards() const { return unopened_; }
  // Shards of the index absent from every directory whose tensors the model
  // does not use (a snapshot without its vision shards), sorted by name.
  const std::vector<MissingShard>& missing_unused_shards() const { return missing_unused_; }
  // One warning line per missing_unused_shards() entry (empty when none).
  std::vector<std::string> missing_shard_warnings() const;
  // OK when no shard is missing; else FAILED_PRECONDITION naming the missing
  // shards (what --strict answers for a snapshot without its vision shards).
  Status refuse_missing_shards() const;
  const base::File& file(uint32_t index) const { return files_[index]; }
  uint64_t total_bytes() const;
  // The model's identity (shared/checkpoint/model_identity.h): its config,
  // tensor list and sampled weights. Equal fingerprints mean expert slots
  // filled by one process are valid for another, whichever shards each holds
  // and whatever form (placed drive, container) they are stored in. open()
  // refuses files of two models and a set of shards with no identity.
  uint64_t fingerprint() const { return fingerprint_; }

  // Looks a tensor up by its model name (without the prefix); nullptr if absent.
  const TensorInfo* find(std::string_view name) const;
  // Like find() but an error naming the tensor when absent.
  StatusOr<const TensorInfo*> get(std::string_view name) const;

  // Reads `n` bytes of `t` starting `offset` bytes into it.
  Status read_bytes(const TensorInfo& t, uint64_t offset, uint64_t n, void* dst) const;
  // Converts rows [row0, row0+nrows) of a BF16/F16/F32 tensor (viewed as
  // [rows, cols]) to f32 into dst[nrows * cols].
  Status read_rows_f32(const TensorInfo& t, int64_t row0, int64_t nrows, float* dst) const;
  // Reads a whole (small) dense tensor as f32.
  StatusOr<std::vector<float>> read_f32(std::string_view name) const;

 private:
  Checkpoint() = default;
  std::string model_dir_;
  std::string prefix_;
  std::vector<std::string> paths_;
  std::vector<std::string> unopened_;
  std::vector<MissingShard> missing_unused_;
  std::vector<base::File> files_;
  std::vector<TensorInfo> tensors_;
  std::unordered_map<std::string, size_t> by_name_;
  uint64_t fingerprint_ = 0;
};

// Which tensors a process needs present.
enum class Required {
  kAll,      // every tensor of the model
  kDense,    // every tensor but the routed experts (engined with experts elsewhere)
  kNothing,  // none (expertd: only what its shards hold)
};

// Checks the tensors the config implies (shared/checkpoint/model_tensors.h):
// those `required` must be present, and every one present has the storage
// class and shape expected. Names what is wrong.
Status validate_checkpoint(const Checkpoint& ck, const ModelConfig& c,
                           Required required = Required::kAll);

// True for a routed expert's tensor name (model.layers.L.block_sparse_moe.experts.E.*).
bool is_routed_expert_tensor(std::string_view name);

// True for a stored tensor name outside the text model, which nothing reads:
// with the multimodal prefix ("language_model.") every name without it; else
// the vision tower and projector (vision_tower.*, mm_projector.*,
// multi_modal_projector.*).
bool is_outside_language_model(std::string_view name, std::string_view prefix);

}  // namespace k3::checkpoint
