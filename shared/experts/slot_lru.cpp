#include "shared/experts/slot_lru.h"

#include <cassert>

namespace k3::experts {

SlotLru::SlotLru(uint32_t count, uint32_t num_experts, std::function<bool(uint32_t)> busy)
    : num_experts_(num_experts),
      busy_(std::move(busy)),
      use_(count, Use::kEmpty),
      key_of_(count, -1),
      lru_pos_(count) {}

void SlotLru::touch(uint32_t slot) {
  lru_.erase(lru_pos_[slot]);
  lru_.push_front(slot);
  lru_pos_[slot] = lru_.begin();
}

std::optional<uint32_t> SlotLru::find(int32_t layer, int32_t expert) {
  auto it = resident_.find(key(layer, expert));
  if (it == resident_.end()) return std::nullopt;
  touch(it->second);
  return it->second;
}

std::optional<uint32_t> SlotLru::empty_slot() {
  for (uint32_t i = 0; i < use_.size(); ++i)
    if (use_[i] == Use::kEmpty && !busy_(i)) {
      use_[i] = Use::kTaken;
      return i;
    }
  return std::nullopt;
}

uint32_t SlotLru::evict(std::list<uint32_t>::iterator it) {
  const uint32_t s = *it;
  resident_.erase(key_of_[s]);
  key_of_[s] = -1;
  lru_.erase(it);
  use_[s] = Use::kTaken;
  return s;
}

std::optional<uint32_t> SlotLru::take() {
  if (auto e = empty_slot()) return e;
  for (auto it = lru_.rbegin(); it != lru_.rend(); ++it)
    if (!busy_(*it)) return evict(std::next(it).base());
  return std::nullopt;
}

std::optional<uint32_t> SlotLru::take_tail() {
  if (auto e = empty_slot()) return e;
  if (lru_.empty() || busy_(lru_.back())) return std::nullopt;
  return evict(std::prev(lru_.end()));
}

void SlotLru::insert(uint32_t slot, int32_t layer, int32_t expert) {
  assert(use_[slot] == Use::kTaken && "insert() takes a slot take() or take_tail() gave");
  const int64_t k = key(layer, expert);
  resident_[k] = slot;
  key_of_[slot] = k;
  use_[slot] = Use::kCached;
  lru_.push_front(slot);
  lru_pos_[slot] = lru_.begin();
}

void SlotLru::release(uint32_t slot) {
  assert(use_[slot] == Use::kTaken && "release() takes a slot take() or take_tail() gave");
  use_[slot] = Use::kEmpty;
}

}  // namespace k3::experts
