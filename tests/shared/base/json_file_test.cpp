#include "shared/base/json_file.h"

#include <gtest/gtest.h>

namespace k3::base {
namespace {

std::string refusal(std::string_view text) {
  auto j = parse_json_file(text, "f.json");
  EXPECT_FALSE(j.ok()) << text;
  return j.ok() ? std::string() : std::string(j.status().message());
}

TEST(JsonFile, ParsesADocument) {
  auto j = parse_json_file(R"({"a": 1, "b": [{"a": 2}, {"a": 3}], "c": {"a": 4}})", "f.json");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["b"][1]["a"], 3);
  // The same key in different objects is fine.
  EXPECT_EQ((*j)["c"]["a"], 4);
}

TEST(JsonFile, RefusesADuplicateKeyAtAnyDepthNamingItAndWhere) {
  EXPECT_EQ(refusal(R"({"port": 1, "port": 2})"), "f.json: duplicate key 'port'");
  EXPECT_EQ(refusal(R"({"hosts": {"x": 1, "y": 2, "x": 3}})"),
            "f.json: duplicate key 'x' (at /hosts)");
  EXPECT_EQ(refusal(R"({"l": [1, {"a": 1}, {"b": 1, "b": 2}]})"),
            "f.json: duplicate key 'b' (at /l/2)");
  EXPECT_EQ(refusal(R"([{"a/b": {"k": 1, "k": 1}}])"), "f.json: duplicate key 'k' (at /0/a~1b)");
  // Equal values too: the file still says the thing twice.
  EXPECT_EQ(refusal(R"({"a": 1, "a": 1})"), "f.json: duplicate key 'a'");
}

TEST(JsonFile, RefusesInvalidJsonNamingTheFile) {
  const std::string m = refusal(R"({"a": )");
  EXPECT_EQ(m.rfind("f.json: not valid JSON", 0), 0u) << m;
  EXPECT_EQ(refusal("").rfind("f.json: not valid JSON", 0), 0u);
}

TEST(JsonFile, OrderedKeepsTheOrderGivenAndRefusesDuplicatesToo) {
  auto j = parse_ordered_json_file(R"({"b": 1, "a": 2})", "o.json");
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->begin().key(), "b");
  auto d = parse_ordered_json_file(R"({"b": 1, "b": 2})", "o.json");
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().message(), "o.json: duplicate key 'b'");
}

}  // namespace
}  // namespace k3::base
