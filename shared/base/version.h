// The build's identity: the CMake project version and the git commit it was
// built from (`git describe --always --dirty` at build time; "unknown" when
// built outside a git checkout, e.g. from a release tarball).
#pragma once

#include <string>
#include <string_view>

namespace k3::base {

// "0.1.0": CMakeLists.txt's project(VERSION).
const char* version();
// "d334309", "v0.1.0-3-gd334309-dirty" or "unknown".
const char* git_commit();
// What `PROGRAM --version` prints: "expertd 0.1.0 (commit d334309)".
std::string version_line(std::string_view program);

}  // namespace k3::base
