// Which drive holds which routed expert (`k3ctl place`). Decode reads every
// MoE layer's chosen experts at once, so each layer's experts are spread over
// ALL drives (placing whole shards would make each layer read from one drive:
// on the real checkpoint one shard holds about one layer's experts).
//
// Replica k of expert e of the j-th MoE layer goes to drive
// ((j * E + e) * R + k) mod D: within a layer every drive gets E*R/D expert
// copies (one more for some), an expert's R copies are on R distinct drives,
// and the leftovers rotate from layer to layer, so the drives' byte totals
// differ by at most one expert.
#pragma once

#include <cstdint>
#include <vector>

#include "shared/checkpoint/model_config.h"
#include "shared/status.h"

namespace k3::checkpoint {

struct DriveLayout {
  int drives = 0;
  int replicas = 1;
  int64_t first_moe_layer = 0;
  int64_t num_experts = 0;
  int64_t num_moe_layers = 0;
  uint64_t expert_bytes = 0;

  // The drives holding expert `e` of `layer` (primary first).
  std::vector<int> drives_of(int64_t layer, int64_t e) const;
  // (layer, expert) pairs of drive `d`, in (layer, id) order.
  std::vector<std::pair<int64_t, int64_t>> experts_of(int d) const;
  uint64_t bytes_of(int d) const;
  // Fewest and most experts any drive holds in one layer.
  int64_t min_per_layer() const;
  int64_t max_per_layer() const;
};

// Refuses drives < 1, replicas outside [1, drives], a model without MoE layers.
StatusOr<DriveLayout> plan_drive_layout(const ModelConfig& c, int drives, int replicas);

}  // namespace k3::checkpoint
