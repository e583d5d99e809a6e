// The LRU over a segment's expert slots: which slot holds which (layer,
// expert), and which slot a new read may take. A slot a client pins (a
// lease, shared/shm/expert_lease.h) is never handed out; a slot being read
// is not in the cache until insert().
//
// Not thread-safe: expertd calls it under its mutex.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

#include "shared/shm/layout.h"

namespace k3::expertd {

class SlotCache {
 public:
  // Over `count` slots; `pinned(slot)` says whether a client holds it.
  SlotCache(shm::SlotEntry* slots, uint32_t count, uint32_t num_experts,
            std::function<bool(uint32_t)> pinned);

  // The slot holding the expert, made the most recent; nullopt if absent.
  std::optional<uint32_t> find(int32_t layer, int32_t expert);
  // A slot to read into: an empty unpinned one, else the least recently used
  // unpinned one (dropped from the cache); nullopt when every slot is pinned
  // or being read.
  std::optional<uint32_t> take();
  // A slot for a speculative read: an empty unpinned one, else the least
  // recently used one only if it is unpinned (a guess never evicts anything
  // more recent); nullopt otherwise.
  std::optional<uint32_t> take_tail();
  // Whether the expert is cached (its recency unchanged).
  bool contains(int32_t layer, int32_t expert) const {
    return resident_.count(key(layer, expert)) != 0;
  }
  // `slot` now holds the expert (READY): the most recent entry.
  void insert(uint32_t slot, int32_t layer, int32_t expert);
  // Experts cached.
  size_t size() const { return resident_.size(); }

 private:
  int64_t key(int32_t layer, int32_t expert) const {
    return static_cast<int64_t>(layer) * num_experts_ + expert;
  }
  void touch(uint32_t slot);
  std::optional<uint32_t> empty_slot() const;
  // Drops the cached `slot` at lru position `it` and returns it.
  uint32_t evict(std::list<uint32_t>::iterator it);

  shm::SlotEntry* slots_;
  uint32_t count_;
  uint32_t num_experts_;
  std::function<bool(uint32_t)> pinned_;
  std::unordered_map<int64_t, uint32_t> resident_;  // key -> slot (READY)
  std::list<uint32_t> lru_;                         // READY slots, front = most recent
  std::vector<std::list<uint32_t>::iterator> lru_pos_;
  std::vector<bool> in_lru_;
};

}  // namespace k3::expertd
