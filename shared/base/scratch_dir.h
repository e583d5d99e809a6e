// A private temporary directory for a tool's working files (mkdtemp under
// $TMPDIR, else /tmp), removed with its contents on destruction.
#pragma once

#include <memory>
#include <string>

#include "shared/status.h"

namespace k3::base {

// Move-free, owned through unique_ptr; not thread-safe.
class ScratchDir {
 public:
  // `stem` names it: $TMPDIR/STEM-XXXXXX.
  static StatusOr<std::unique_ptr<ScratchDir>> create(const std::string& stem);
  ~ScratchDir();
  ScratchDir(const ScratchDir&) = delete;
  ScratchDir& operator=(const ScratchDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  explicit ScratchDir(std::string p) : path_(std::move(p)) {}
  std::string path_;
};

}  // namespace k3::base
