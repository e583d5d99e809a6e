// shared/chat/python_compat.cpp: Python's float repr, json.dumps styles and
// str.strip, as the chat template uses them.
#include "shared/chat/python_compat.h"

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"

namespace k3::chat {
namespace {

using nlohmann::ordered_json;

TEST(XtmlPythonCompat, FloatReprMatchesPython) {
  const std::pair<double, const char*> cases[] = {{1.0, "1.0"},
                                                  {1.5, "1.5"},
                                                  {-0.0, "-0.0"},
                                                  {0.1, "0.1"},
                                                  {1e16, "1e+16"},
                                                  {1e15, "1000000000000000.0"},
                                                  {0.0001, "0.0001"},
                                                  {0.00001, "1e-05"},
                                                  {1.5e-7, "1.5e-07"},
                                                  {123456789.125, "123456789.125"},
                                                  {1e100, "1e+100"},
                                                  {2.5e-300, "2.5e-300"},
                                                  {9999999999999998.0, "9999999999999998.0"},
                                                  {0.30000000000000004, "0.30000000000000004"},
                                                  {-1234.5678, "-1234.5678"}};
  for (const auto& [v, want] : cases) EXPECT_EQ(python_float_repr(v), want) << v;
}

TEST(XtmlPythonCompat, JsonDumpsStyles) {
  const ordered_json v = ordered_json::parse(
      R"({"b": [1, 2.0, "x\n\u0001\"\\/é😀"], "a": {"d": null, "c": true}, "é": -3})");
  EXPECT_EQ(dump_json(v, JsonStyle::kCompactSorted),
            "{\"a\":{\"c\":true,\"d\":null},\"b\":[1,2.0,\"x\\n\\u0001\\\"\\\\/é😀\"],\"é\":-3}");
  EXPECT_EQ(dump_json(v, JsonStyle::kSpacedOrdered),
            "{\"b\": [1, 2.0, \"x\\n\\u0001\\\"\\\\/é😀\"], \"a\": {\"d\": null, \"c\": true}, "
            "\"é\": -3}");
  EXPECT_EQ(dump_json(ordered_json::object(), JsonStyle::kSpacedOrdered), "{}");
  EXPECT_EQ(dump_json(ordered_json::array(), JsonStyle::kCompactSorted), "[]");
}

TEST(XtmlPythonCompat, StripAndBlank) {
  EXPECT_EQ(python_strip(" \t\n\u3000x y\u00a0\r\n"), "x y");
  EXPECT_EQ(python_strip("\u200bx"), "\u200bx");  // zero width space is not white space
  EXPECT_TRUE(is_blank(" \u2028\u0085\x1c"));
  EXPECT_FALSE(is_blank(" . "));
  EXPECT_TRUE(is_blank(""));
}

}  // namespace
}  // namespace k3::chat
