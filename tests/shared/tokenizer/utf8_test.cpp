// shared/tokenizer/utf8.cpp: lossy decoding and validation.
#include "shared/tokenizer/utf8.h"

#include "gtest/gtest.h"

namespace k3::tokenizer {
namespace {

TEST(Utf8, LossyDecodingSubstitutesMaximalSubparts) {
  auto lossy = [](std::string_view b) {
    std::string out;
    append_utf8_lossy(b, &out);
    return out;
  };
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(lossy("a\x80"
                  "b"),
            "a" + r + "b");
  EXPECT_EQ(lossy("\xE4\xBD"), r);              // truncated 3-byte: one
  EXPECT_EQ(lossy("\xED\xA0\x80"), r + r + r);  // surrogate: ED A0 not a prefix
  EXPECT_EQ(lossy("\xF0\x9F\x98"), r);
  EXPECT_EQ(lossy("\xC0\xAF"), r + r);  // overlong lead
  EXPECT_EQ(lossy("\xF4\x90\x80\x80"), r + r + r + r);
  EXPECT_EQ(lossy("\xE4\xBD\xA0"), "\xE4\xBD\xA0");
  EXPECT_EQ(incomplete_utf8_tail("ab\xE4\xBD"), 2u);
  EXPECT_EQ(incomplete_utf8_tail("ab\xF0"), 1u);
  EXPECT_EQ(incomplete_utf8_tail("ab\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_utf8_tail("ab\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("ab\xED\xA0"), 0u);  // can never complete
  EXPECT_EQ(incomplete_utf8_tail("ab"), 0u);
  EXPECT_EQ(first_invalid_utf8("hello, 世界"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8("0123456789\xF5"), 10u);
}

}  // namespace
}  // namespace k3::tokenizer
