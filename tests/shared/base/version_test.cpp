#include "shared/base/version.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <regex>

#include "tests/test_util.h"

namespace k3::base {
namespace {

// project(... VERSION x.y.z) in the top CMakeLists.txt.
std::string project_version() {
  std::smatch m;
  const std::string top = testing::read_file(testing::source_dir() + "/CMakeLists.txt");
  if (!std::regex_search(top, m, std::regex(R"(project\(k3serve[^)]*VERSION ([0-9.]+))")))
    return "";
  return m[1];
}

TEST(Version, IsTheCMakeProjectVersionAndACommit) {
  EXPECT_EQ(version(), project_version());
  const std::string commit = git_commit();
  // An abbreviated hash, possibly after a tag, possibly -dirty; or "unknown".
  EXPECT_TRUE(commit == "unknown" ||
              std::regex_match(commit, std::regex(R"(([\w.-]+-\d+-g)?[0-9a-f]{7,40}(-dirty)?)")))
      << commit;
  EXPECT_EQ(version_line("expertd"),
            "expertd " + std::string(version()) + " (commit " + commit + ")");
}

// cmake/git_version.cmake, run as the build runs it.
std::string generate(const std::string& source_dir, const std::string& out) {
  auto r = testing::run_command({"/usr/bin/cmake", "-DSOURCE_DIR=" + source_dir, "-DVERSION=9.8.7",
                                 "-DOUTPUT=" + out, "-P",
                                 testing::source_dir() + "/cmake/git_version.cmake"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return testing::read_file(out);
}

TEST(Version, ATreeWithoutGitHasAnUnknownCommit) {
  // A release tarball unpacked somewhere (here: inside no repository at all,
  // or inside another one: the tree's own .git is what counts).
  testing::TempDir tmp;
  std::filesystem::create_directories(tmp.file("k3serve-9.8.7"));
  const std::string h = generate(tmp.file("k3serve-9.8.7"), tmp.file("v.h"));
  EXPECT_CONTAINS(h, "#define K3_VERSION \"9.8.7\"");
  EXPECT_CONTAINS(h, "#define K3_GIT_COMMIT \"unknown\"");
}

TEST(Version, AGitCheckoutHasItsDescribedCommit) {
  if (!std::filesystem::exists(testing::source_dir() + "/.git"))
    GTEST_SKIP() << "built from a tree without .git";
  testing::TempDir tmp;
  const std::string h = generate(testing::source_dir(), tmp.file("v.h"));
  auto r = testing::run_command(
      {"/usr/bin/git", "-C", testing::source_dir(), "rev-parse", "--short=7", "HEAD"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::string head = r.out.substr(0, r.out.find('\n'));
  EXPECT_CONTAINS(h, head);
  // Unchanged: the file is not rewritten (nothing recompiles).
  const auto before = std::filesystem::last_write_time(tmp.file("v.h"));
  generate(testing::source_dir(), tmp.file("v.h"));
  EXPECT_EQ(std::filesystem::last_write_time(tmp.file("v.h")), before);
}

}  // namespace
}  // namespace k3::base
