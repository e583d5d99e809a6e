// A named POSIX shared-memory segment (Boost.Interprocess), mapped read-write.
// Move-only RAII: unmaps on destruction; removal of the name is explicit.
#pragma once

#include <memory>
#include <string>

#include "shared/base/status.h"

namespace k3::shm {

class Segment {
 public:
  Segment();
  ~Segment();
  Segment(Segment&&) noexcept;
  Segment& operator=(Segment&&) noexcept;

  // Creates a new segment (fails if the name exists) of `bytes`, zero-filled,
  // mode 0600, every page reserved at once (RESOURCE_EXHAUSTED naming the free
  // space when the filesystem lacks it, instead of a SIGBUS later).
  static StatusOr<Segment> create(const std::string& name, uint64_t bytes);
  // Maps an existing segment.
  static StatusOr<Segment> open(const std::string& name);
  // Removes the name (mappings stay valid until unmapped). False if absent.
  static bool remove(const std::string& name);
  static bool exists(const std::string& name);

  void* base() const;
  uint64_t size() const;
  const std::string& name() const { return name_; }

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
  std::string name_;
};

// A valid segment name: [A-Za-z0-9._-]{1,200}.
bool valid_segment_name(const std::string& name);

}  // namespace k3::shm
