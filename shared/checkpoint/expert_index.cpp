#include "shared/checkpoint/expert_index.h"

#include "shared/checkpoint/container.h"
#include "shared/checkpoint/model_tensors.h"

namespace k3 {

StatusOr<ExpertIndex> ExpertIndex::build(const Checkpoint& ck, const ModelConfig& c) {
  ExpertIndex idx;
  idx.first_moe_ = c.first_k_dense_replace;
  idx.num_experts_ = c.num_moe_layers() > 0 ? c.num_experts : 0;
  idx.expert_bytes_ = c.expert_bytes();
  // Layout inside one expert's buffer: the six tensors in storage order.
  {
    uint64_t off = 0;
    int i = 0;
    for (const ExpectedTensor& e : expert_tensors(c, c.first_k_dense_replace, 0)) {
      uint64_t n = 1;
      for (int64_t d : e.shape) n *= static_cast<uint64_t>(d);
      idx.layout_.offset[i] = off;
      idx.layout_.nbytes[i] = n;
      off += n;
      ++i;
    }
  }
  idx.locs_.reserve(static_cast<size_t>(c.num_moe_layers() * idx.num_experts_));
  for (int64_t l = c.first_k_dense_replace; l < c.num_hidden_layers; ++l) {
    for (int64_t e = 0; e < c.num_experts; ++e) {
      std::vector<ExpectedTensor> want = expert_tensors(c, l, e);
      ExpertLocation loc;
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

int64_t ExpertIndex::contiguous_count() const {
  int64_t n = 0;
  for (const auto& l : locs_) n += l.contiguous;
  return n;
}

}  // namespace k3
