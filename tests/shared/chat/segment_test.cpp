// shared/chat/segment.cpp: attribute escaping.
#include "shared/chat/segment.h"

#include "gtest/gtest.h"

namespace k3::chat {
namespace {

TEST(XtmlSegments, AttributeEscapingRoundTrips) {
  EXPECT_EQ(escape_attribute("a&b\"c<d>'"), "a&amp;b&quot;c<d>'");
  EXPECT_EQ(escape_attribute("&quot;"), "&amp;quot;");
  for (const char* s : {"a&b\"c", "&quot;", "&amp;&", "plain", ""}) {
    EXPECT_EQ(unescape_attribute(escape_attribute(s)), s);
  }
}

}  // namespace
}  // namespace k3::chat
