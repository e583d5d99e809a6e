// The LRU over a cache's expert slots, for every reader that keeps experts
// in slots (expertd's segment server, engined's in-process reader): which
// slot holds which (layer, expert), and which slot a new read may take. A
// busy slot (pinned by a client's lease, or its bytes in use) is never
// handed out; a slot taken for a read is in no list until insert() (the
// read succeeded) or release() (it failed).
//
// Not thread-safe: each owner calls it under its own lock or on one thread.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <optional>
#include <unordered_map>
#include <vector>

namespace k3::experts {

class SlotLru {
 public:
  // Over `count` slots, all empty; `busy(slot)` says whether the slot may
  // not be handed out now.
  SlotLru(uint32_t count, uint32_t num_experts, std::function<bool(uint32_t)> busy);

  // The slot holding the expert, made the most recent; nullopt if absent.
  std::optional<uint32_t> find(int32_t layer, int32_t expert);
  // A slot to read into: an empty idle one, else the least recently used
  // idle one (dropped from the cache); nullopt when every slot is busy or
  // being read.
  std::optional<uint32_t> take();
  // A slot for a speculative read: an empty idle one, else the least
  // recently used one only if it is idle (a guess never evicts anything
  // more recent); nullopt otherwise.
  std::optional<uint32_t> take_tail();
  // Whether the expert is cached (its recency unchanged).
  bool contains(int32_t layer, int32_t expert) const {
    return resident_.count(key(layer, expert)) != 0;
  }
  // `slot` (taken) now holds the expert: the most recent entry.
  void insert(uint32_t slot, int32_t layer, int32_t expert);
  // `slot` (taken) holds nothing after all (its read failed): empty again.
  void release(uint32_t slot);
  // Experts cached.
  size_t size() const { return resident_.size(); }

 private:
  enum class Use : uint8_t { kEmpty, kTaken, kCached };
  int64_t key(int32_t layer, int32_t expert) const {
    return static_cast<int64_t>(layer) * num_experts_ + expert;
  }
  void touch(uint32_t slot);
  std::optional<uint32_t> empty_slot();
  // Drops the cached `slot` at lru position `it`; returns it, taken.
  uint32_t evict(std::list<uint32_t>::iterator it);

  uint32_t num_experts_;
  std::function<bool(uint32_t)> busy_;
  std::vector<Use> use_;                            // per slot
  std::vector<int64_t> key_of_;                     // per cached slot
  std::unordered_map<int64_t, uint32_t> resident_;  // key -> slot (cached)
  std::list<uint32_t> lru_;                         // cached slots, front = most recent
  std::vector<std::list<uint32_t>::iterator> lru_pos_;
};

}  // namespace k3::experts
