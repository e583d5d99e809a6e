// A mounted faultfs (tests/faults/faultfs.cpp): a view of a directory
// (read-only unless writable) whose chosen byte ranges fail with EIO, read
// short or are slow, changed at run time with set(). Unmounted on
// destruction.
#pragma once

#include <memory>
#include <string>

#include "tests/test_util.h"

namespace k3::faults_test {

class FaultFs {
 public:
  // Why faultfs cannot run here (no /dev/fuse, no fusermount3, not built);
  // empty when it can.
  static std::string unavailable();
  // Mounts `source` at `mountpoint` (created); ok() says whether it worked.
  // `writable`: faultfs --writable (files may be created, written, renamed,
  // removed), else read-only.
  FaultFs(const std::string& source, const std::string& mountpoint, const std::string& work_dir,
          bool writable = false);
  ~FaultFs();
  FaultFs(const FaultFs&) = delete;
  FaultFs& operator=(const FaultFs&) = delete;

  bool ok() const { return mounted_; }
  const std::string& mountpoint() const { return mountpoint_; }
  // Replaces the fault table (faultfs.cpp's format), atomically.
  void set(const std::string& table);
  void clear() { set(""); }
  // faultfs's log (each injected fault is a line).
  std::string log() const { return testing::read_file(log_); }
  // How many reads it failed or cut short so far.
  size_t injected() const;

 private:
  std::string mountpoint_, faults_, log_;
  std::unique_ptr<testing::Process> proc_;
  bool mounted_ = false;
};

}  // namespace k3::faults_test
