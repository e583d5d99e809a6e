// Daemon config files: a JSON object of flags, placed before the command
// line's own flags; errors name the file and key.
#include "shared/base/config_file.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace k3 {
namespace {

using Args = std::vector<std::string>;
const auto kAny = [](const std::string&) { return true; };

TEST(ConfigFile, ExpandsBeforeTheCommandLineFlags) {
  testing::TempDir tmp;
  testing::write_file(tmp.file("c.json"),
                      R"({"model": "/m", "cache_gb": 2.5, "expertd": ["a", "b"],
                          "no-direct": true, "verbose": false, "max_queue": 7, "skip": null})");
  auto r = base::expand_config_file(
      {"engined", "serve", "--sessions", "3", "--config", tmp.file("c.json")}, 2,
      {"no-direct", "verbose"}, kAny);
  ASSERT_TRUE(r.ok()) << r.status();
  // (keys in sorted order)
  EXPECT_EQ(*r, (Args{"engined", "serve", "--cache-gb", "2.5", "--expertd", "a", "--expertd", "b",
                      "--max-queue", "7", "--model", "/m", "--no-direct", "--sessions", "3"}));
  auto none = base::expand_config_file({"x", "--a", "1"}, 1, {}, kAny);
  EXPECT_EQ(*none, (Args{"x", "--a", "1"}));
}

TEST(ConfigFile, RefusesBadFilesNamingTheProblem) {
  testing::TempDir tmp;
  struct Case {
    const char* text;
    const char* says;
  };
  for (const Case& c :
       {Case{"{", "not valid JSON"}, Case{"[1]", "JSON object"},
        Case{R"({"bogus": 1})", "'bogus': no such flag"},
        Case{R"({"model": {"a": 1}})", "'model' must be a string or a number"},
        Case{R"({"flag": "yes"})", "'flag' must be true or false"},
        Case{R"({"model": [1, [2]]})", "'model'[1]"},
        Case{R"({"model": "a", "flag": true, "model": "b"})", "duplicate key 'model'"}}) {
    testing::write_file(tmp.file("c.json"), c.text);
    auto r = base::expand_config_file({"x", "--config=" + tmp.file("c.json")}, 1, {"flag"},
                                      [](const std::string& n) { return n != "bogus"; });
    ASSERT_FALSE(r.ok()) << c.text;
    EXPECT_NE(r.status().message().find(c.says), std::string::npos) << r.status();
    EXPECT_NE(r.status().message().find("c.json"), std::string::npos) << r.status();
  }
  EXPECT_FALSE(base::expand_config_file({"x", "--config"}, 1, {}, kAny).ok());
  EXPECT_FALSE(
      base::expand_config_file({"x", "--config", tmp.file("missing.json")}, 1, {}, kAny).ok());
}

}  // namespace
}  // namespace k3
