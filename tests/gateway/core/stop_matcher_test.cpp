// gateway/core/stop_matcher.h: stop strings over streamed text, split across
// pieces or not, and held-back text released when it turns out not to stop.
#include "gateway/core/stop_matcher.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace k3::gateway {
namespace {

std::string feed_all(StopMatcher& m, const std::vector<std::string>& pieces, bool* stopped) {
  std::string out;
  for (const auto& p : pieces) {
    out += m.feed(p, stopped);
    if (*stopped) return out;
  }
  return out + m.flush();
}

TEST(StopMatcher, StopsBeforeAStopStringSplitAcrossPieces) {
  StopMatcher m({"END", "\n\n"});
  bool stopped = false;
  EXPECT_EQ(feed_all(m, {"hello E", "N", "D and more"}, &stopped), "hello ");
  EXPECT_TRUE(stopped);
  StopMatcher m2({"\n\n"});
  EXPECT_EQ(feed_all(m2, {"a\n", "b\n", "\nc"}, &stopped), "a\nb");
  EXPECT_TRUE(stopped);
}

TEST(StopMatcher, ReleasesHeldTextThatTurnsOutNotToStop) {
  StopMatcher m({"stop"});
  bool stopped = false;
  EXPECT_EQ(m.feed("to st", &stopped), "to ");
  EXPECT_EQ(m.feed("ar", &stopped), "star");
  EXPECT_EQ(m.feed("s", &stopped), "");  // "s" may start "stop"
  EXPECT_EQ(m.feed(" st", &stopped), "s ");
  EXPECT_EQ(m.flush(), "st");
  EXPECT_FALSE(stopped);
  StopMatcher none({});
  EXPECT_EQ(none.feed("anything", &stopped), "anything");
}

TEST(StopMatcher, NamesTheStopStringThatEndedTheText) {
  StopMatcher m({"NEVER", "END", "EN"});
  bool stopped = false;
  EXPECT_EQ(m.matched(), "");
  // "END" and "EN" both start at the same place: the first listed wins.
  EXPECT_EQ(m.feed("abc END more", &stopped), "abc ");
  EXPECT_TRUE(stopped);
  EXPECT_EQ(m.matched(), "END");
  // The earliest in the text wins over the order of the list.
  StopMatcher later({"later", "x"});
  EXPECT_EQ(later.feed("a x later", &stopped), "a ");
  EXPECT_EQ(later.matched(), "x");
}

}  // namespace
}  // namespace k3::gateway
