// A checkpoint file mapped read-only and shared (PROT_READ, MAP_SHARED): its
// pages are the page cache's, file-backed and reclaimable, counted once
// however many processes map the file (engined --mmap on a container).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>

#include "shared/base/file.h"
#include "shared/status.h"

namespace k3::engined {

class MappedFile {
 public:
  // Maps all of `f` (its page-table entries filled at once: MAP_POPULATE).
  static StatusOr<std::shared_ptr<const MappedFile>> map(const base::File& f);
  ~MappedFile();
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const uint8_t* data() const { return static_cast<const uint8_t*>(addr_); }
  size_t size() const { return size_; }

 private:
  MappedFile() = default;
  void* addr_ = nullptr;
  size_t size_ = 0;
};

}  // namespace k3::engined
