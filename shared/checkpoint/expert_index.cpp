#include "shared/checkpoint/expert_index.h"

#include <cstring>

#include "shared/checkpoint/container.h"
#include "shared/checkpoint/model_tensors.h"

namespace k3::checkpoint {

ExpertLayout ExpertIndex::layout_for(const ModelConfig& c) {
  // Layout inside one expert's buffer: the six tensors in storage order.
  ExpertLayout lay;
  uint64_t off = 0;
  int i = 0;
  for (const ExpectedTensor& e : expert_tensors(c, c.first_k_dense_replace, 0)) {
    uint64_t n = 1;
    for (int64_t d : e.shape) n *= static_cast<uint64_t>(d);
    lay.offset[i] = off;
    lay.nbytes[i] = n;
    off += n;
    ++i;
  }
  return lay;
}

StatusOr<ExpertIndex> ExpertIndex::build(const Checkpoint& ck, const ModelConfig& c, bool partial) {
  ExpertIndex idx;
  idx.first_moe_ = c.first_k_dense_replace;
  idx.num_experts_ = c.num_moe_layers() > 0 ? c.num_experts : 0;
  idx.expert_bytes_ = c.expert_bytes();
  idx.layout_ = layout_for(c);
  idx.locs_.reserve(static_cast<size_t>(c.num_moe_layers() * idx.num_experts_));
  for (int64_t l = c.first_k_dense_replace; l < c.num_hidden_layers; ++l) {
    for (int64_t e = 0; e < c.num_experts; ++e) {
      std::vector<ExpectedTensor> want = expert_tensors(c, l, e);
      ExpertLocation loc;
      if (partial) {
        size_t found = 0;
        for (const ExpectedTensor& w : want) found += ck.find(w.name) != nullptr;
        if (found == 0) {
          idx.locs_.push_back(loc);  // not present
          continue;
        }
        if (found != want.size())
          return absl::InvalidArgumentError(cat("expert ", e, " of layer ", l, " has ", found,
                                                " of its ", want.size(),
                                                " tensors in the opened shards"));
      }
      loc.present = true;
      bool contiguous = true;
      for (size_t i = 0; i < want.size(); ++i) {
        // Bound from the tensor table: dtype and shape checked here.
        K3_ASSIGN_OR_RETURN(StoredTensor st, find_stored(ck, want[i]));
        const TensorInfo* t = st.data;
        if (i == 0) {
          loc.file = t->file;
          loc.offset = t->offset;
        } else if (t->file != loc.file) {
          return absl::InvalidArgumentError(cat("expert ", e, " of layer ", l, " is split across ",
                                                ck.files()[loc.file], " and ",
                                                ck.files()[t->file]));
        }
        loc.tensor_offset[i] = t->offset;
        if (t->offset != loc.offset + idx.layout_.offset[i]) contiguous = false;
      }
      loc.contiguous = contiguous;
      loc.length = idx.expert_bytes_;
      idx.locs_.push_back(loc);
    }
  }
  return idx;
}

bool ExpertIndex::present(int64_t layer, int64_t expert) const {
  if (layer < first_moe_ || expert < 0 || expert >= num_experts_) return false;
  const size_t i = static_cast<size_t>((layer - first_moe_) * num_experts_ + expert);
  return i < locs_.size() && locs_[i].present;
}

int64_t ExpertIndex::present_count() const {
  int64_t n = 0;
  for (const auto& l : locs_) n += l.present;
  return n;
}

int64_t ExpertIndex::contiguous_count() const {
  int64_t n = 0;
  for (const auto& l : locs_) n += l.contiguous;
  return n;
}

Status check_expert_scales(const ExpertLayout& lay, const uint8_t* bytes, int64_t layer,
                           int64_t expert) {
  // Storage order: w1.packed, w1.scale, w2.packed, w2.scale, w3.packed, w3.scale.
  for (int i : {1, 3, 5}) {
    const void* bad = std::memchr(bytes + lay.offset[i], 0xFF, lay.nbytes[i]);
    if (bad != nullptr)
      return absl::DataLossError(
          cat("expert ", expert, " of layer ", layer, ": w", (i + 1) / 2,
              ".weight_scale holds 0xFF (NaN in E8M0) at byte ",
              static_cast<const uint8_t*>(bad) - (bytes + lay.offset[i]),
              "; the checkpoint is corrupt (k3ctl verify names the damage)"));
  }
  return absl::OkStatus();
}

}  // namespace k3::checkpoint
