// The slot LRU: empty slots first, then the least recently used unpinned one.
#include "expertd/slot_cache.h"

#include <gtest/gtest.h>

#include <set>

namespace k3::expertd {
namespace {

TEST(SlotCache, TakesEmptySlotsThenEvictsTheLeastRecentUnpinned) {
  std::vector<shm::SlotEntry> slots(3);
  for (auto& s : slots) s.state.store(static_cast<uint32_t>(shm::SlotState::kEmpty));
  std::set<uint32_t> pinned;
  SlotCache cache(slots.data(), 3, 8, [&](uint32_t s) { return pinned.count(s) > 0; });
  auto fill = [&](int32_t layer, int32_t expert) {
    auto s = cache.take();
    EXPECT_TRUE(s.has_value());
    slots[*s].layer.store(layer);
    slots[*s].expert.store(expert);
    slots[*s].state.store(static_cast<uint32_t>(shm::SlotState::kReady));
    cache.insert(*s, layer, expert);
    return *s;
  };
  const uint32_t a = fill(1, 0), b = fill(1, 1), c = fill(2, 7);
  EXPECT_EQ(std::set<uint32_t>({a, b, c}).size(), 3u);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(cache.find(1, 1), b);
  EXPECT_FALSE(cache.find(2, 0).has_value());
  // Recency now (most recent first): b, c, a. With a pinned, c goes.
  pinned.insert(a);
  EXPECT_EQ(cache.take(), c);
  EXPECT_FALSE(cache.find(2, 7).has_value()) << "an evicted expert is gone";
  EXPECT_EQ(cache.find(1, 0), a) << "a pinned expert stays";
  pinned.insert(b);
  // c was taken (being read, not in the cache); a and b pinned: nothing to give.
  slots[c].state.store(static_cast<uint32_t>(shm::SlotState::kReading));
  EXPECT_FALSE(cache.take().has_value());
  pinned.clear();
  EXPECT_EQ(cache.take(), b) << "b is now the least recent (a was found after it)";
}

}  // namespace
}  // namespace k3::expertd
