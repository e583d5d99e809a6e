#include "expertd/slot_cache.h"

namespace k3::expertd {

SlotCache::SlotCache(shm::SlotEntry* slots, uint32_t count, uint32_t num_experts,
                     std::function<bool(uint32_t)> pinned)
    : slots_(slots),
      count_(count),
      num_experts_(num_experts),
      pinned_(std::move(pinned)),
      lru_pos_(count),
      in_lru_(count, false) {}

void SlotCache::touch(uint32_t slot) {
  if (in_lru_[slot]) lru_.erase(lru_pos_[slot]);
  lru_.push_front(slot);
  lru_pos_[slot] = lru_.begin();
  in_lru_[slot] = true;
}

std::optional<uint32_t> SlotCache::find(int32_t layer, int32_t expert) {
  auto it = resident_.find(key(layer, expert));
  if (it == resident_.end()) return std::nullopt;
  touch(it->second);
  return it->second;
}

std::optional<uint32_t> SlotCache::empty_slot() const {
  for (uint32_t i = 0; i < count_; ++i)
    if (slots_[i].state.load(std::memory_order_relaxed) ==
            static_cast<uint32_t>(shm::SlotState::kEmpty) &&
        !pinned_(i))
      return i;
  return std::nullopt;
}

uint32_t SlotCache::evict(std::list<uint32_t>::iterator it) {
  const uint32_t s = *it;
  resident_.erase(key(slots_[s].layer.load(), slots_[s].expert.load()));
  lru_.erase(it);
  in_lru_[s] = false;
  return s;
}

std::optional<uint32_t> SlotCache::take() {
  if (auto e = empty_slot()) return e;
  for (auto it = lru_.rbegin(); it != lru_.rend(); ++it)
    if (!pinned_(*it)) return evict(std::next(it).base());
  return std::nullopt;
}

std::optional<uint32_t> SlotCache::take_tail() {
  if (auto e = empty_slot()) return e;
  if (lru_.empty() || pinned_(lru_.back())) return std::nullopt;
  return evict(std::prev(lru_.end()));
}

void SlotCache::insert(uint32_t slot, int32_t layer, int32_t expert) {
  resident_[key(layer, expert)] = slot;
  touch(slot);
}

}  // namespace k3::expertd
