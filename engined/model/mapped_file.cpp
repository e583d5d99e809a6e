#include "engined/model/mapped_file.h"

#include <sys/mman.h>

#include <cerrno>
#include <cstring>

namespace k3::engined {

StatusOr<std::shared_ptr<const MappedFile>> MappedFile::map(const base::File& f) {
  std::shared_ptr<MappedFile> m(new MappedFile());
  m->size_ = f.size();
  if (m->size_ == 0) return std::shared_ptr<const MappedFile>(m);
  m->addr_ = ::mmap(nullptr, m->size_, PROT_READ, MAP_SHARED | MAP_POPULATE, f.fd(), 0);
  if (m->addr_ == MAP_FAILED) {
    m->addr_ = nullptr;
    return absl::InternalError(cat(f.path(), ": mmap failed: ", std::strerror(errno)));
  }
  return std::shared_ptr<const MappedFile>(m);
}

MappedFile::~MappedFile() {
  if (addr_ != nullptr) ::munmap(addr_, size_);
}

}  // namespace k3::engined
