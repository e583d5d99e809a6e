// The slot LRU: empty slots first, then the least recently used idle one.
#include "shared/experts/slot_lru.h"

#include <gtest/gtest.h>

#include <set>

namespace k3::experts {
namespace {

TEST(SlotLru, TakesEmptySlotsThenEvictsTheLeastRecentUnpinned) {
  std::set<uint32_t> pinned;
  SlotLru cache(3, 8, [&](uint32_t s) { return pinned.count(s) > 0; });
  auto fill = [&](int32_t layer, int32_t expert) {
    auto s = cache.take();
    EXPECT_TRUE(s.has_value());
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
  EXPECT_FALSE(cache.take().has_value());
  pinned.clear();
  EXPECT_EQ(cache.take(), b) << "b is now the least recent (a was found after it)";
}

// A speculative read's slot: an empty one, else the LRU tail only, and only
// when the tail is unpinned (a guess never evicts a more recent expert).
TEST(SlotLru, SpeculativeReadsTakeOnlyTheTail) {
  std::set<uint32_t> pinned;
  SlotLru cache(3, 8, [&](uint32_t s) { return pinned.count(s) > 0; });
  auto fill = [&](int32_t layer, int32_t expert) {
    auto s = cache.take_tail();
    EXPECT_TRUE(s.has_value()) << "an empty slot first";
    cache.insert(*s, layer, expert);
    return *s;
  };
  const uint32_t a = fill(1, 0), b = fill(1, 1), c = fill(1, 2);
  EXPECT_TRUE(cache.contains(1, 0));
  EXPECT_FALSE(cache.contains(1, 3));
  // Recency: c, b, a. The tail a is pinned: no slot, though b is free to go.
  pinned.insert(a);
  EXPECT_FALSE(cache.take_tail().has_value());
  EXPECT_TRUE(cache.contains(1, 1)) << "b was not evicted by a guess";
  EXPECT_EQ(cache.take(), b) << "a demand read does evict past the pinned tail";
  pinned.clear();
  // contains() leaves recency alone: a is still the tail.
  EXPECT_TRUE(cache.contains(1, 0));
  EXPECT_EQ(cache.take_tail(), a);
  EXPECT_TRUE(cache.contains(1, 2));
  (void)c;
}

// A read that failed gives its slot back empty: the next take has it first,
// and a busy empty slot is passed over.
TEST(SlotLru, ReleasedSlotIsEmptyAgain) {
  std::set<uint32_t> busy;
  SlotLru cache(2, 8, [&](uint32_t s) { return busy.count(s) > 0; });
  const uint32_t a = *cache.take();
  cache.insert(a, 0, 1);
  const uint32_t b = *cache.take();
  EXPECT_NE(a, b);
  EXPECT_EQ(cache.take(), a) << "both slots in use: the LRU one is evicted";
  cache.release(b);
  EXPECT_FALSE(cache.contains(0, 1));
  busy.insert(b);
  EXPECT_FALSE(cache.take().has_value()) << "an empty busy slot is not handed out";
  busy.clear();
  EXPECT_EQ(cache.take(), b) << "the released slot is empty again";
}

}  // namespace
}  // namespace k3::experts
