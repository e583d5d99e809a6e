#include "shared/checkpoint/drive_layout.h"

#include <algorithm>
#include <limits>

namespace k3::checkpoint {

StatusOr<DriveLayout> plan_drive_layout(const ModelConfig& c, int drives, int replicas) {
  if (drives < 1) return absl::InvalidArgumentError("placement needs at least one drive");
  if (replicas < 1 || replicas > drives)
    return absl::InvalidArgumentError(cat("--replicas ", replicas, " must be between 1 and the ",
                                          drives, " drives (a replica needs a drive of its own)"));
  if (c.num_moe_layers() <= 0 || c.num_experts <= 0)
    return absl::InvalidArgumentError("the model has no routed experts to place");
  DriveLayout p;
  p.drives = drives;
  p.replicas = replicas;
  p.first_moe_layer = c.first_k_dense_replace;
  p.num_experts = c.num_experts;
  p.num_moe_layers = c.num_moe_layers();
  p.expert_bytes = c.expert_bytes();
  return p;
}

std::vector<int> DriveLayout::drives_of(int64_t layer, int64_t e) const {
  // Replica slots numbered layer by layer, expert by expert, dealt round-robin:
  // a layer's E*r slots are consecutive, so each drive gets its share of them
  // to within one, and an expert's r slots land on r distinct drives.
  const int64_t first_slot = ((layer - first_moe_layer) * num_experts + e) * replicas;
  std::vector<int> out;
  for (int k = 0; k < replicas; ++k) out.push_back(static_cast<int>((first_slot + k) % drives));
  return out;
}

std::vector<std::pair<int64_t, int64_t>> DriveLayout::experts_of(int d) const {
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t l = first_moe_layer; l < first_moe_layer + num_moe_layers; ++l)
    for (int64_t e = 0; e < num_experts; ++e) {
      const std::vector<int> ds = drives_of(l, e);
      if (std::find(ds.begin(), ds.end(), d) != ds.end()) out.emplace_back(l, e);
    }
  return out;
}

uint64_t DriveLayout::bytes_of(int d) const {
  return experts_of(d).size() * expert_bytes;
}

namespace {
template <typename Pick>
int64_t per_layer_extreme(const DriveLayout& p, int64_t start, Pick pick) {
  int64_t best = start;
  for (int64_t l = p.first_moe_layer; l < p.first_moe_layer + p.num_moe_layers; ++l) {
    std::vector<int64_t> count(static_cast<size_t>(p.drives), 0);
    for (int64_t e = 0; e < p.num_experts; ++e)
      for (int d : p.drives_of(l, e)) ++count[static_cast<size_t>(d)];
    for (int64_t n : count) best = pick(best, n);
  }
  return best;
}
}  // namespace

int64_t DriveLayout::min_per_layer() const {
  return per_layer_extreme(*this, std::numeric_limits<int64_t>::max(),
                           [](int64_t a, int64_t b) { return std::min(a, b); });
}

int64_t DriveLayout::max_per_layer() const {
  return per_layer_extreme(*this, 0, [](int64_t a, int64_t b) { return std::max(a, b); });
}

}  // namespace k3::checkpoint
