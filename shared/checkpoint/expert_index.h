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

namespace k3 {

// Byte ranges of the six tensors relative to the start of the expert's read,
// in the storage order above.
struct ExpertLayout {
  std::array<uint64_t, 6> offset{};
  std::array<uint64_t, 6> nbytes{};
};

struct ExpertLocation {
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
  // Indexes every routed expert of every MoE layer. Refuses an expert whose
  // tensors are split across files, or whose sizes disagree with the config.
  static StatusOr<ExpertIndex> build(const Checkpoint& ck, const ModelConfig& c);

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

 private:
  int64_t first_moe_ = 0;
  int64_t num_experts_ = 0;
  uint64_t expert_bytes_ = 0;
  ExpertLayout layout_;
  std::vector<ExpertLocation> locs_;
};

}  // namespace k3
