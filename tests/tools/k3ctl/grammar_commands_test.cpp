// k3ctl grammar-check as a real process on the tiny model's tokenizer: one
// verdict per line, and exit 2 naming an unsupported keyword.
#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace k3 {
namespace {

using testing::TempDir;

testing::CommandResult check(const std::string& schema, const std::string& lines) {
  TempDir tmp;
  testing::write_file(tmp.file("schema.json"), schema);
  return testing::run_command({testing::bin_dir() + "/k3ctl", "grammar-check", "--model",
                               testing::tiny_model_dir(), "--schema", tmp.file("schema.json")},
                              lines);
}

TEST(GrammarCheck, OneVerdictPerLine) {
  auto r = check(R"({"type":"object","properties":{"name":{"type":"string"},
      "age":{"type":"integer","minimum":0}},"required":["name"],"additionalProperties":false})",
                 "{\"name\":\"Bob\",\"age\":3}\n"
                 "{\"age\":3}\n"
                 "{\"name\":\"x\",\"age\":-1}\n"
                 "{\"name\":\"h\xC3\xA9llo w\xC3\xB6rld\"}\n"
                 "{\"name\":\"x\",\"extra\":1}\n"
                 "not json\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "true\nfalse\nfalse\ntrue\nfalse\nfalse\n");
}

// The schema file is read keeping its key order: a const object is the
// one spelling declared (and a duplicated key is refused).
TEST(GrammarCheck, ConstObjectsKeepTheDeclaredKeyOrder) {
  auto r = check(R"({"const":{"b":1,"a":2}})", "{\"b\":1,\"a\":2}\n{\"a\":2,\"b\":1}\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "true\nfalse\n");
  auto d = check(R"({"type":"string","type":"integer"})", "1\n");
  EXPECT_NE(d.exit_code, 0);
  EXPECT_NE(d.err.find("duplicate key 'type'"), std::string::npos) << d.err;
}

// `false` is a schema: it compiles, and no line matches it.
TEST(GrammarCheck, FalseSchemaAcceptsNothing) {
  auto r = check("false", "1\n{}\n\"x\"\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "false\nfalse\nfalse\n");
  auto p = check(R"({"properties":{"bar":false}})", "{\"bar\":1}\n{\"foo\":1}\n");
  EXPECT_EQ(p.exit_code, 0) << p.err;
  EXPECT_EQ(p.out, "false\ntrue\n");
}

TEST(GrammarCheck, UnsupportedKeywordExits2NamingIt) {
  auto r = check(R"({"type":"string","format":"email"})", "\"a\"\n");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'format'"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace k3
