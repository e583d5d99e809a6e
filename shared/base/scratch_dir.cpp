#include "shared/base/scratch_dir.h"

#include <stdlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

namespace k3::base {

StatusOr<std::unique_ptr<ScratchDir>> ScratchDir::create(const std::string& stem) {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/" + stem + "-XXXXXX";
  if (::mkdtemp(tmpl.data()) == nullptr)
    return absl::PermissionDeniedError(cat("mkdtemp ", tmpl, ": ", std::strerror(errno)));
  return std::unique_ptr<ScratchDir>(new ScratchDir(tmpl));
}

ScratchDir::~ScratchDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

}  // namespace k3::base
