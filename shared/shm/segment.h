// A shared-memory segment, mapped read-write. Move-only RAII: unmaps on
// destruction; removal of the name is explicit.
//
// A segment is named by a reference: a bare NAME is the POSIX shared-memory
// object /dev/shm/NAME (Boost.Interprocess); an absolute path DIR/NAME is a
// file in DIR (expertd --segment-dir: e.g. a hugetlbfs mount, whose pages are
// huge and never swapped), mapped MAP_SHARED. The reference is what expertd's
// Describe reports, what the gateway's placement carries and what engined's
// --expertd takes, so a segment outside /dev/shm needs nothing else.
#pragma once

#include <memory>
#include <string>

#include "shared/status.h"

namespace k3::shm {

class Segment {
 public:
  Segment();
  ~Segment();
  Segment(Segment&&) noexcept;
  Segment& operator=(Segment&&) noexcept;

  // Creates a new segment (fails if the name exists) of `bytes` (rounded up
  // to the filesystem's page: a hugetlbfs page), zero-filled, every page
  // reserved at once (RESOURCE_EXHAUSTED naming the free space when the
  // filesystem lacks it, instead of a SIGBUS later). Mode 0600 whatever the
  // umask, or `mode` (0660: a service group shares it; nothing wider).
  static StatusOr<Segment> create(const std::string& name, uint64_t bytes, unsigned mode = 0600);
  // Maps an existing segment, if check_segment_owner() allows it
  // (PERMISSION_DENIED naming owner and mode otherwise).
  static StatusOr<Segment> open(const std::string& name);
  // Removes the name (mappings stay valid until unmapped). False if absent.
  static bool remove(const std::string& name);
  static bool exists(const std::string& name);

  struct Impl;  // the backing (segment.cpp)

  void* base() const;
  uint64_t size() const;
  const std::string& name() const { return name_; }  // the reference

 private:
  std::unique_ptr<Impl> impl_;
  std::string name_;
};

// Whether the segment open as fd (at `path`, for messages) may be used: a
// regular file owned by this process's euid or root, or by another user of
// one of our groups with group access (expertd's 0660); its mode no wider
// than 0660. A segment another local user created first under the service's
// name (with their own experts in it) is refused, naming owner and mode.
Status check_segment_owner(int fd, const std::string& path);

// A valid segment name: [A-Za-z0-9._-]{1,200}.
bool valid_segment_name(const std::string& name);
// A valid reference: a valid name, or an absolute path whose last component
// is a valid name (no "." or ".." components).
bool valid_segment_ref(const std::string& ref);
// Where a reference's bytes are: /dev/shm/NAME, or the path itself.
std::string segment_path(const std::string& ref);
// The reference of segment `name` in `dir` ("" or "/dev/shm": the bare name).
std::string segment_ref(const std::string& dir, const std::string& name);

}  // namespace k3::shm
