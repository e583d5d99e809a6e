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

// Number bounds compare exact decimals, as the constraint does in generation.
TEST(GrammarCheck, NumberBoundsAreExactDecimals) {
  auto r = check(R"({"type":"number","exclusiveMinimum":-1,"maximum":0.1})",
                 "0.1\n0.1000000000000000055\n1e-1\n-1\n-0.9999999999\n-0\n1E2\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "true\nfalse\ntrue\nfalse\ntrue\ntrue\nfalse\n");
  auto h = check(R"({"type":"number","minimum":100,"maximum":100})", "1e2\n100.00\n100.01\n");
  EXPECT_EQ(h.exit_code, 0) << h.err;
  EXPECT_EQ(h.out, "true\ntrue\nfalse\n");
}

TEST(GrammarCheck, UnsupportedKeywordExits2NamingIt) {
  auto r = check(R"({"type":"string","format":"email"})", "\"a\"\n");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("'format'"), std::string::npos) << r.err;
  EXPECT_EQ(r.out, "");
}

}  // namespace
}  // namespace k3
