#include "shared/base/version.h"

// Generated into the build tree by cmake/git_version.cmake; only this file
// includes it, so a new commit recompiles one translation unit.
#include "k3_build_version.h"

namespace k3::base {

const char* version() {
  return K3_VERSION;
}

const char* git_commit() {
  return K3_GIT_COMMIT;
}

std::string version_line(std::string_view program) {
  return std::string(program) + " " + version() + " (commit " + git_commit() + ")";
}

}  // namespace k3::base
