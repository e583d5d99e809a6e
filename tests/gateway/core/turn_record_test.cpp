#include "gateway/core/turn_record.h"

#include <gtest/gtest.h>

namespace k3::gateway {
namespace {

TEST(TurnRecord, FindsTheLongestRecordedPrefixAtAMessageStart) {
  TurnRecord r(8);
  r.remember({1, 2, 3}, {1, 2, 9, 9, 3}, 2);
  r.remember({1, 2, 3, 4, 5}, {1, 2, 9, 9, 3, 4, 7, 5}, 2);
  const std::vector<int32_t> prompt = {1, 2, 3, 4, 5, 6, 7};
  auto hit = r.find(prompt, {3, 5});
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->rendered_len, 5u);
  EXPECT_EQ(hit->ran, (std::vector<int32_t>{1, 2, 9, 9, 3, 4, 7, 5}));
  EXPECT_EQ(hit->ran_len, 8u);
  // Only at the given message starts.
  hit = r.find(prompt, {3, 4});
  ASSERT_TRUE(hit);
  EXPECT_EQ(hit->rendered_len, 3u);
  EXPECT_FALSE(r.find(prompt, {4, 6}));
  EXPECT_FALSE(r.find({1, 2, 8, 4, 5}, {3, 5}));
}

TEST(TurnRecord, TheLeastRecentlyUsedGoesFirst) {
  TurnRecord r(2);
  r.remember({1}, {1, 5}, 1);
  r.remember({2}, {2, 5}, 1);
  EXPECT_TRUE(r.find({1, 0}, {1}));  // {1} is now the most recent
  r.remember({3}, {3, 5}, 1);
  EXPECT_TRUE(r.find({1, 0}, {1}));
  EXPECT_FALSE(r.find({2, 0}, {1}));
  EXPECT_TRUE(r.find({3, 0}, {1}));
}

}  // namespace
}  // namespace k3::gateway
