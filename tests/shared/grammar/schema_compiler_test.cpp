// One test per supported JSON Schema keyword: what it admits and refuses,
// fed byte by byte through the document grammar.
#include <gtest/gtest.h>

#include "tests/shared/grammar/grammar_test_util.h"

namespace k3::grammar {
namespace {

using testing::accepts;
using testing::compile_error;

TEST(SchemaKeywords, TypeEach) {
  EXPECT_TRUE(accepts(R"({"type":"null"})", "null"));
  EXPECT_FALSE(accepts(R"({"type":"null"})", "nul"));
  EXPECT_TRUE(accepts(R"({"type":"boolean"})", "true"));
  EXPECT_TRUE(accepts(R"({"type":"boolean"})", "false"));
  EXPECT_FALSE(accepts(R"({"type":"boolean"})", "1"));
  EXPECT_TRUE(accepts(R"({"type":"string"})", R"("héllo \"x\" \\ \n \u001f")"));
  EXPECT_FALSE(accepts(R"({"type":"string"})", R"("a)"));
  EXPECT_FALSE(accepts(R"({"type":"string"})", "\"\x01\""));          // raw control character
  EXPECT_FALSE(accepts(R"({"type":"string"})", R"("\u0041")"));       // not canonical
  EXPECT_FALSE(accepts(R"({"type":"string"})", R"("\/")"));           // not canonical
  EXPECT_FALSE(accepts(R"({"type":"string"})", "\"\xC0\xAF\""));      // overlong UTF-8
  EXPECT_FALSE(accepts(R"({"type":"string"})", "\"\xED\xA0\x80\""));  // a surrogate
  EXPECT_TRUE(accepts(R"({"type":"number"})", "-12.5e+3"));
  EXPECT_TRUE(accepts(R"({"type":"number"})", "0"));
  EXPECT_FALSE(accepts(R"({"type":"number"})", "01"));
  EXPECT_FALSE(accepts(R"({"type":"number"})", "1."));
  EXPECT_FALSE(accepts(R"({"type":"number"})", "1e400"));  // 3 exponent digits: not finite-safe
  EXPECT_TRUE(accepts(R"({"type":"integer"})", "-42"));
  EXPECT_FALSE(accepts(R"({"type":"integer"})", "4.2"));
  EXPECT_FALSE(accepts(R"({"type":"integer"})", "-0"));
  EXPECT_TRUE(accepts(R"({"type":"object"})", R"({"a":[1,{"b":null}],"c":"d"})"));
  EXPECT_FALSE(accepts(R"({"type":"object"})", R"({"a":1,})"));
  EXPECT_FALSE(accepts(R"({"type":"object"})", R"({"a" : 1})"));  // compact only
  EXPECT_TRUE(accepts(R"({"type":"array"})", R"([1,"x",[],{}])"));
  EXPECT_FALSE(accepts(R"({"type":"array"})", R"([1,])"));
  EXPECT_TRUE(accepts(R"({"type":["string","null"]})", "null"));
  EXPECT_TRUE(accepts(R"({"type":["string","null"]})", R"("x")"));
  EXPECT_FALSE(accepts(R"({"type":["string","null"]})", "1"));
}

TEST(SchemaKeywords, NoTypeAdmitsAnyValue) {
  EXPECT_TRUE(accepts("{}", "1"));
  EXPECT_TRUE(accepts("true", R"({"x":[true]})"));
  EXPECT_FALSE(accepts("{}", "tru"));
}

TEST(SchemaKeywords, PropertiesAndRequired) {
  const std::string s =
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},"required":["a"]})";
  EXPECT_TRUE(accepts(s, R"({"a":1})"));
  EXPECT_TRUE(accepts(s, R"({"b":"x","a":1})"));
  EXPECT_TRUE(accepts(s, R"({"a":1,"zz":[1]})"));  // additional allowed by default
  EXPECT_FALSE(accepts(s, R"({"b":"x"})"));        // a missing
  EXPECT_FALSE(accepts(s, R"({"a":"1"})"));        // a mistyped
  EXPECT_FALSE(accepts(s, R"({"a":1,"a":2})"));    // repeated
  EXPECT_FALSE(accepts(s, R"({"a":1,"b":2})"));
  EXPECT_TRUE(accepts(s, R"({"a":1,"ab":2})"));  // a name that extends a declared one
}

TEST(SchemaKeywords, AdditionalPropertiesFalseAndSchema) {
  const std::string closed =
      R"({"type":"object","properties":{"a":{"type":"integer"}},"additionalProperties":false})";
  EXPECT_TRUE(accepts(closed, R"({"a":1})"));
  EXPECT_TRUE(accepts(closed, R"({})"));
  EXPECT_FALSE(accepts(closed, R"({"b":1})"));
  EXPECT_FALSE(accepts(closed, R"({"ab":1})"));
  const std::string typed = R"({"type":"object","additionalProperties":{"type":"boolean"}})";
  EXPECT_TRUE(accepts(typed, R"({"x":true,"y":false})"));
  EXPECT_FALSE(accepts(typed, R"({"x":1})"));
  EXPECT_NE(compile_error(R"({"type":"object","required":["q"],"additionalProperties":false})"),
            "");
}

TEST(SchemaKeywords, EnumAndConst) {
  const std::string e = R"({"enum":["red","green",1,null,{"k":[1]}]})";
  EXPECT_TRUE(accepts(e, R"("red")"));
  EXPECT_TRUE(accepts(e, "1"));
  EXPECT_TRUE(accepts(e, "null"));
  EXPECT_TRUE(accepts(e, R"({"k":[1]})"));
  EXPECT_FALSE(accepts(e, R"("blue")"));
  EXPECT_FALSE(accepts(e, "12"));
  EXPECT_TRUE(accepts(R"({"enum":[1,12]})", "12"));
  EXPECT_TRUE(accepts(R"({"enum":[1,12]})", "1"));
  EXPECT_TRUE(accepts(R"({"const":"x"})", R"("x")"));
  EXPECT_FALSE(accepts(R"({"const":"x"})", R"("y")"));
  EXPECT_TRUE(accepts(R"({"type":"string","enum":["a",2]})", R"("a")"));
  EXPECT_FALSE(accepts(R"({"type":"string","enum":["a",2]})", "2"));
}

TEST(SchemaKeywords, EnumAndConstObjectsKeepTheDeclaredKeyOrder) {
  // The constraint writes the value as declared (compact, keys in order).
  EXPECT_TRUE(accepts(R"({"const":{"b":1,"a":2}})", R"({"b":1,"a":2})"));
  EXPECT_FALSE(accepts(R"({"const":{"b":1,"a":2}})", R"({"a":2,"b":1})"));
  EXPECT_TRUE(accepts(R"({"enum":[{"z":{"y":1,"x":2}},3]})", R"({"z":{"y":1,"x":2}})"));
  // const beside an enum holding it (equal as JSON, in any key order): the
  // value is const's, spelled as const declares it.
  const std::string both = R"({"const":{"b":1,"a":2},"enum":[{"a":2,"b":1},5]})";
  EXPECT_TRUE(accepts(both, R"({"b":1,"a":2})"));
  EXPECT_FALSE(accepts(both, "5"));
  // Not held: nothing satisfies both (const alone was admitted before).
  EXPECT_EQ(compile_error(R"({"const":{"b":1,"a":2},"enum":[{"a":3,"b":1}]})"),
            "#: 'const' is not one of the 'enum' values");
}

TEST(SchemaKeywords, FalseSubSchemasAdmitNothing) {
  // A property whose schema is false cannot appear (not even as an
  // additional property).
  const std::string p = R"({"type":"object","properties":{"foo":{},"bar":false}})";
  EXPECT_TRUE(accepts(p, R"({"foo":1})"));
  EXPECT_TRUE(accepts(p, R"({"baz":1})"));
  EXPECT_FALSE(accepts(p, R"({"bar":1})"));
  EXPECT_FALSE(accepts(p, R"({"foo":1,"bar":null})"));
  // items false: only the empty array.
  EXPECT_TRUE(accepts(R"({"items":false})", "[]"));
  EXPECT_FALSE(accepts(R"({"items":false})", "[1]"));
  EXPECT_TRUE(accepts(R"({"items":false})", R"("not an array")"));
  // An alternative that is false is never taken.
  EXPECT_TRUE(accepts(R"({"anyOf":[false,{"type":"integer"}]})", "1"));
  EXPECT_FALSE(accepts(R"({"anyOf":[false,{"type":"integer"}]})", R"("x")"));
  EXPECT_TRUE(accepts(R"({"oneOf":[true,false]})", R"("x")"));
  // The schema false: a document grammar that accepts nothing.
  EXPECT_EQ(compile_error("false"), "");
  EXPECT_FALSE(accepts("false", "1"));
  EXPECT_FALSE(accepts("false", "{}"));
  // Required and false: no object at all.
  EXPECT_FALSE(accepts(R"({"properties":{"a":false},"required":["a"]})", R"({"a":1})"));
  EXPECT_TRUE(accepts(R"({"properties":{"a":false},"required":["a"]})", "1"));
}

TEST(SchemaKeywords, AnyOfAndOneOfBesideOtherKeywordsApplyBoth) {
  const std::string s =
      R"({"type":"integer","anyOf":[{"minimum":2},{"maximum":0}],"description":"x"})";
  EXPECT_TRUE(accepts(s, "2"));
  EXPECT_TRUE(accepts(s, "-3"));
  EXPECT_FALSE(accepts(s, "1"));
  EXPECT_FALSE(accepts(s, R"("2")"));
  // type intersects: number within integer, string against integer is none.
  const std::string t = R"({"type":"integer","anyOf":[{"type":"number"},{"type":"string"}]})";
  EXPECT_TRUE(accepts(t, "3"));
  EXPECT_FALSE(accepts(t, "3.5"));
  EXPECT_FALSE(accepts(t, R"("a")"));
  // Objects: required unites, properties merge.
  const std::string o = R"({"type":"object","properties":{"a":{"type":"integer"}},
      "required":["a"],"oneOf":[{"required":["b"]},{"properties":{"a":{"maximum":0}}}]})";
  EXPECT_TRUE(accepts(o, R"({"a":5,"b":1})"));
  EXPECT_TRUE(accepts(o, R"({"a":-1})"));
  EXPECT_FALSE(accepts(o, R"({"a":-1,"b":1})"));  // both alternatives: not oneOf
  EXPECT_FALSE(accepts(o, R"({"a":5})"));
  EXPECT_FALSE(accepts(o, R"({"b":1})"));
  // What cannot be merged soundly is refused, naming it.
  EXPECT_NE(compile_error(R"({"additionalProperties":false,"anyOf":[{"properties":{"a":{}}}]})")
                .find("'additionalProperties' both beside and inside"),
            std::string::npos);
  EXPECT_NE(compile_error(R"({"type":"string","pattern":"a","anyOf":[{"pattern":"b"}]})")
                .find("'pattern' both beside and inside"),
            std::string::npos);
  EXPECT_NE(compile_error(R"({"type":"strng","anyOf":[{"type":"string"}]})").find("unknown type"),
            std::string::npos);
}

TEST(SchemaKeywords, RefBesideOtherKeywordsAppliesBoth) {
  const std::string s = R"({"$defs":{"n":{"type":"integer","minimum":0}},
      "$ref":"#/$defs/n","maximum":9})";
  EXPECT_TRUE(accepts(s, "0"));
  EXPECT_TRUE(accepts(s, "9"));
  EXPECT_FALSE(accepts(s, "10"));
  EXPECT_FALSE(accepts(s, "-1"));
  // Inside properties, with a recursive target.
  const std::string r = R"({"$defs":{"node":{"type":"object","properties":{
      "v":{"type":"integer"},"next":{"$ref":"#/$defs/node"}}}},
      "type":"object","properties":{"head":{"$ref":"#/$defs/node","required":["v"]}}})";
  EXPECT_TRUE(accepts(r, R"({"head":{"v":1,"next":{"next":{}}}})"));
  EXPECT_FALSE(accepts(r, R"({"head":{"next":{}}})"));
  EXPECT_FALSE(accepts(r, R"({"head":{"v":"x"}})"));
}

TEST(SchemaKeywords, AnyOf) {
  const std::string s = R"({"anyOf":[{"type":"integer"},{"type":"string","maxLength":2}]})";
  EXPECT_TRUE(accepts(s, "5"));
  EXPECT_TRUE(accepts(s, R"("ab")"));
  EXPECT_FALSE(accepts(s, R"("abc")"));
  EXPECT_FALSE(accepts(s, "true"));
}

TEST(SchemaKeywords, OneOfRefusesValuesMatchingTwo) {
  const std::string s = R"({"oneOf":[{"type":"integer"},{"type":"number"}]})";
  EXPECT_TRUE(accepts(s, "1.5"));
  EXPECT_FALSE(accepts(s, "1"));  // an integer is a number too
  const std::string objects =
      R"({"oneOf":[{"type":"object","properties":{"k":{"const":"a"}},"required":["k"]},
                   {"type":"object","properties":{"k":{"const":"b"}},"required":["k"]}]})";
  EXPECT_TRUE(accepts(objects, R"({"k":"a"})"));
  EXPECT_TRUE(accepts(objects, R"({"k":"b"})"));
  EXPECT_FALSE(accepts(objects, R"({"k":"c"})"));
}

TEST(SchemaKeywords, RefNonRecursiveAndRecursive) {
  const std::string flat =
      R"({"$defs":{"id":{"type":"integer","minimum":1}},"type":"object",
          "properties":{"a":{"$ref":"#/$defs/id"}},"required":["a"]})";
  EXPECT_TRUE(accepts(flat, R"({"a":3})"));
  EXPECT_FALSE(accepts(flat, R"({"a":0})"));
  const std::string tree =
      R"({"$defs":{"node":{"type":"object","properties":{"v":{"type":"integer"},
          "kids":{"type":"array","items":{"$ref":"#/$defs/node"}}},"required":["v"],
          "additionalProperties":false}},"$ref":"#/$defs/node"})";
  EXPECT_TRUE(accepts(tree, R"({"v":1,"kids":[{"v":2},{"v":3,"kids":[{"v":4}]}]})"));
  EXPECT_FALSE(accepts(tree, R"({"v":1,"kids":[{"w":2}]})"));
  const std::string root =
      R"({"type":"array","items":{"anyOf":[{"type":"integer"},{"$ref":"#"}]}})";
  EXPECT_TRUE(accepts(root, "[1,[2,[3]],[]]"));
  EXPECT_FALSE(accepts(root, "[1,[\"x\"]]"));
  EXPECT_NE(compile_error(R"({"$ref":"#/$defs/missing"})"), "");
  EXPECT_NE(compile_error(R"({"$defs":{"a":{"$ref":"#/$defs/a"}},"$ref":"#/$defs/a"})"), "");
}

TEST(SchemaKeywords, ItemsMinItemsMaxItems) {
  const std::string s = R"({"type":"array","items":{"type":"boolean"},"minItems":1,"maxItems":2})";
  EXPECT_FALSE(accepts(s, "[]"));
  EXPECT_TRUE(accepts(s, "[true]"));
  EXPECT_TRUE(accepts(s, "[true,false]"));
  EXPECT_FALSE(accepts(s, "[true,false,true]"));
  EXPECT_FALSE(accepts(s, "[1]"));
}

TEST(SchemaKeywords, MinLengthMaxLengthInCodePoints) {
  const std::string s = R"({"type":"string","minLength":2,"maxLength":3})";
  EXPECT_FALSE(accepts(s, R"("a")"));
  EXPECT_TRUE(accepts(s, R"("ab")"));
  EXPECT_TRUE(accepts(s, "\"\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80\""));  // 3 code points, 9 bytes
  EXPECT_FALSE(accepts(s, R"("abcd")"));
  EXPECT_TRUE(accepts(s, R"("\n\t")"));  // escapes count as one
}

TEST(SchemaKeywords, IntegerMinimumMaximum) {
  const std::string s = R"({"type":"integer","minimum":-5,"maximum":120})";
  EXPECT_TRUE(accepts(s, "-5"));
  EXPECT_TRUE(accepts(s, "0"));
  EXPECT_TRUE(accepts(s, "120"));
  EXPECT_FALSE(accepts(s, "121"));
  EXPECT_FALSE(accepts(s, "-6"));
  EXPECT_FALSE(accepts(s, "1200"));
  EXPECT_TRUE(accepts(R"({"type":"integer","minimum":100})", "100"));
  EXPECT_FALSE(accepts(R"({"type":"integer","minimum":100})", "99"));
  // Numbers too, compared exactly (tests/shared/grammar/number_range_test.cpp).
  EXPECT_EQ(compile_error(R"({"type":"number","minimum":1})"), "");
  EXPECT_FALSE(accepts(R"({"type":"number","minimum":1})", "0.99"));
}

TEST(SchemaKeywords, Pattern) {
  const std::string date = R"({"type":"string","pattern":"^[0-9]{4}-[0-9]{2}-[0-9]{2}$"})";
  EXPECT_TRUE(accepts(date, R"("2026-12-01")"));
  EXPECT_FALSE(accepts(date, R"("2026-1-01")"));
  EXPECT_FALSE(accepts(date, R"("x2026-12-01")"));
  const std::string inner = R"({"type":"string","pattern":"ab+c"})";  // unanchored: anywhere
  EXPECT_TRUE(accepts(inner, R"("xxabbcyy")"));
  EXPECT_FALSE(accepts(inner, R"("ac")"));
  const std::string alt = R"j({"type":"string","pattern":"^(cat|dog)s?$"})j";
  EXPECT_TRUE(accepts(alt, R"("dogs")"));
  EXPECT_FALSE(accepts(alt, R"("cow")"));
  EXPECT_TRUE(accepts(R"({"type":"string","pattern":"^\\w+@\\w+\\.com$"})", R"("a_1@b.com")"));
  EXPECT_TRUE(accepts(R"({"type":"string","pattern":"^[^a]*$"})", "\"b\xC3\xA9\""));
  EXPECT_TRUE(accepts(R"({"type":"string","pattern":"^a\\nb$"})", R"("a\nb")"));
  EXPECT_NE(compile_error(R"j({"type":"string","pattern":"(?=a)"})j"), "");
  EXPECT_NE(compile_error(R"({"type":"string","pattern":"(a)\\1"})"), "");
  EXPECT_NE(compile_error(R"({"type":"string","pattern":"a{1,100}"})"), "");
}

TEST(SchemaKeywords, UnsupportedKeywordsAreNamed) {
  EXPECT_NE(compile_error(R"({"type":"string","format":"email"})").find("'format'"),
            std::string::npos);
  EXPECT_NE(
      compile_error(R"({"type":"object","patternProperties":{}})").find("'patternProperties'"),
      std::string::npos);
  EXPECT_NE(compile_error(R"({"not":{}})").find("'not'"), std::string::npos);
  EXPECT_NE(compile_error(R"({"type":"array","items":[{}]})"), "");
  EXPECT_NE(compile_error(R"({"type":"thing"})"), "");
  EXPECT_EQ(compile_error(R"({"type":"string","title":"t","description":"d"})"), "");
}

}  // namespace
}  // namespace k3::grammar
