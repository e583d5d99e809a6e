// Where each routed expert's bytes live: (layer, expert) -> file, offset,
// length. The checkpoint stores an expert's six MXFP4 tensors back to back
// (w1.packed, w1.scale, w2.packed, w2.scale, w3.packed, w3.scale), so one
// read fetches the whole expert; the index records whether that holds.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/model_config.h"

namespace k3::checkpoint {

// Byte ranges of the six tensors relative to the start of the expert's read,
// in the storage order above.
struct ExpertLayout {
  std::array<uint64_t, 6> offset{};
  std::array<uint64_t, 6> nbytes{};
};

struct ExpertLocation {
  bool present = false;  // its tensors are in the opened shards
  uint32_t file = 0;
  uint64_t offset = 0;  // absolute file offset of w1.packed
  uint64_t length = 0;  // bytes of all six tensors
  // True when the six tensors are contiguous in storage order (one read).
  bool contiguous = false;
  // Absolute file offsets of the six tensors (all in `file`).
  std::array<uint64_t, 6> tensor_offset{};
};

// Immutable after build(); thread-safe.
class ExpertIndex {
 public:
  // Indexes the routed experts of every MoE layer. Refuses an expert whose
  // tensors are split across files, or whose sizes disagree with the config.
  // Unless `partial`, every expert must be present; with it (expertd: a drive
  // owns some shards), the absent ones are simply not present(), but an
  // expert with only some of its six tensors is refused.
  static StatusOr<ExpertIndex> build(const Checkpoint& ck, const ModelConfig& c,
                                     bool partial = false);
  // The in-buffer layout the config implies (identical for every expert).
  static ExpertLayout layout_for(const ModelConfig& c);

  const ExpertLocation& at(int64_t layer, int64_t expert) const {
    return locs_[static_cast<size_t>((layer - first_moe_) * num_experts_ + expert)];
  }
  // The layout within one expert's read buffer, identical for every expert.
  const ExpertLayout& layout() const { return layout_; }
  uint64_t expert_bytes() const { return expert_bytes_; }
  int64_t first_moe_layer() const { return first_moe_; }
  int64_t num_experts() const { return num_experts_; }
  // How many experts are stored contiguously (one read each).
  int64_t contiguous_count() const;
  // Whether the opened shards hold expert `expert` of `layer` (false outside
  // the MoE layers).
  bool present(int64_t layer, int64_t expert) const;
  // Experts present, and experts the model has.
  int64_t present_count() const;
  int64_t total_count() const { return static_cast<int64_t>(locs_.size()); }

 private:
  int64_t first_moe_ = 0;
  int64_t num_experts_ = 0;
  uint64_t expert_bytes_ = 0;
  ExpertLayout layout_;
  std::vector<ExpertLocation> locs_;
};

// Refuses an expert's bytes (laid out as `lay`) whose MXFP4 scales hold 0xFF:
// NaN in E8M0, which would turn every output it touches into NaN. Readers call
// it once per read from storage (the scales are 1/17 of the bytes), so a
// corrupt expert fails its request with DATA_LOSS naming it and is not cached.
Status check_expert_scales(const ExpertLayout& lay, const uint8_t* bytes, int64_t layer,
                           int64_t expert);

}  // namespace k3::checkpoint
