#include "shared/shm/expert_lease.h"

namespace k3::shm {

ExpertLease& ExpertLease::operator=(ExpertLease&& o) noexcept {
  if (this == &o) return *this;
  release();
  base_ = o.base_;
  entry_ = o.entry_;
  data_ = o.data_;
  bit_ = o.bit_;
  epoch_ = o.epoch_;
  slot_ = o.slot_;
  generation_ = o.generation_;
  layer_ = o.layer_;
  expert_ = o.expert_;
  o.entry_ = nullptr;
  o.data_ = nullptr;
  o.bit_ = 0;
  return *this;
}

StatusOr<ExpertLease> ExpertLease::adopt(void* base, uint32_t client, uint64_t epoch,
                                         const Completion& cp, int32_t layer, int32_t expert) {
  if (client >= kMaxClients)
    return absl::InvalidArgumentError(cat("client ", client, " out of range"));
  const Header* h = header_of(base);
  if (cp.slot >= h->slot_count)
    return absl::DataLossError(cat("expertd granted slot ", cp.slot, " of ", h->slot_count));
  ExpertLease l;
  l.base_ = base;
  l.entry_ = &slots_of(base)[cp.slot];
  l.bit_ = 1ull << client;
  l.epoch_ = epoch;
  l.slot_ = cp.slot;
  l.generation_ = cp.generation;
  l.layer_ = layer;
  l.expert_ = expert;
  const uint64_t off = l.entry_->data_offset.load(std::memory_order_acquire);
  if (!l.valid() || off < h->data_offset || off + h->expert_bytes > h->total_bytes)
    return absl::DataLossError(
        cat("slot ", cp.slot, " does not hold expert ", expert, " of layer ", layer, " as leased"));
  l.data_ = static_cast<const uint8_t*>(base) + off;
  return l;
}

bool ExpertLease::valid() const {
  if (entry_ == nullptr) return false;
  return entry_->state.load(std::memory_order_acquire) ==
             static_cast<uint32_t>(SlotState::kReady) &&
         entry_->generation.load(std::memory_order_acquire) == generation_ &&
         entry_->layer.load(std::memory_order_acquire) == layer_ &&
         entry_->expert.load(std::memory_order_acquire) == expert_ &&
         (entry_->pins.load(std::memory_order_acquire) & bit_) != 0 &&
         header_of(base_)->epoch == epoch_;
}

void ExpertLease::release() {
  if (entry_ != nullptr) entry_->pins.fetch_and(~bit_, std::memory_order_acq_rel);
  entry_ = nullptr;
  data_ = nullptr;
  bit_ = 0;
}

}  // namespace k3::shm
