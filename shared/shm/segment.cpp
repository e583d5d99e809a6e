#include "shared/shm/segment.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>

#include <algorithm>
#include <cctype>
#include <cstring>

#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>

#include "shared/base/progress.h"

namespace k3::shm {

namespace bip = boost::interprocess;

struct Segment::Impl {
  bip::shared_memory_object shm;
  bip::mapped_region region;
};

Segment::Segment() = default;
Segment::~Segment() = default;
Segment::Segment(Segment&&) noexcept = default;
Segment& Segment::operator=(Segment&&) noexcept = default;

bool valid_segment_name(const std::string& name) {
  if (name.empty() || name.size() > 200) return false;
  for (char c : name)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-'))
      return false;
  return true;
}

StatusOr<Segment> Segment::create(const std::string& name, uint64_t bytes) {
  if (!valid_segment_name(name))
    return absl::InvalidArgumentError(cat("invalid shared-memory segment name '", name, "'"));
  Segment s;
  s.name_ = name;
  bool created = false;  // only a segment made here is removed on failure
  try {
    auto impl = std::make_unique<Impl>();
    // Owner only: the slots hold the model's weights and the rings its
    // requests; engined runs as the same service user and maps it read-write.
    impl->shm = bip::shared_memory_object(bip::create_only, name.c_str(), bip::read_write,
                                          bip::permissions(0600));
    created = true;
    const int fd = impl->shm.get_mapping_handle().handle;
    ::fchmod(fd, 0600);  // whatever the umask
    impl->shm.truncate(static_cast<bip::offset_t>(bytes));
    // Reserve every page now: a tmpfs that runs out later would SIGBUS the
    // process on first touch of a slot. posix_fallocate fails instead.
    // In 256 MiB steps, with progress: tens of GB take a while on tmpfs.
    int rc = 0;
    {
      Progress progress("segment /dev/shm/" + name, bytes);
      constexpr uint64_t kStep = 256ull << 20;
      for (uint64_t off = 0; off < bytes && rc == 0; off += kStep) {
        const uint64_t len = std::min(kStep, bytes - off);
        rc = ::posix_fallocate(fd, static_cast<off_t>(off), static_cast<off_t>(len));
        if (rc == 0) progress.advance(len);
      }
    }
    if (rc != 0) {
      struct statvfs st {};
      const bool known = ::fstatvfs(fd, &st) == 0;
      bip::shared_memory_object::remove(name.c_str());
      return absl::ResourceExhaustedError(
          cat("cannot reserve ", bytes, " bytes for shared-memory segment /dev/shm/", name, ": ",
              std::strerror(rc),
              known ? cat(" (its filesystem has ", static_cast<uint64_t>(st.f_bavail) * st.f_frsize,
                          " bytes free of ", static_cast<uint64_t>(st.f_blocks) * st.f_frsize, ")")
                    : std::string(),
              "; lower --cache-gb or grow /dev/shm (mount -o remount,size=...)"));
    }
    impl->region = bip::mapped_region(impl->shm, bip::read_write);
    s.impl_ = std::move(impl);
  } catch (const bip::interprocess_exception& e) {
    if (created) bip::shared_memory_object::remove(name.c_str());
    return absl::UnavailableError(cat("cannot create shared-memory segment /dev/shm/", name, " of ",
                                      bytes, " bytes: ", e.what()));
  }
  return s;
}

StatusOr<Segment> Segment::open(const std::string& name) {
  if (!valid_segment_name(name))
    return absl::InvalidArgumentError(cat("invalid shared-memory segment name '", name, "'"));
  Segment s;
  s.name_ = name;
  try {
    auto impl = std::make_unique<Impl>();
    impl->shm = bip::shared_memory_object(bip::open_only, name.c_str(), bip::read_write);
    impl->region = bip::mapped_region(impl->shm, bip::read_write);
    s.impl_ = std::move(impl);
  } catch (const bip::interprocess_exception& e) {
    return absl::UnavailableError(
        cat("cannot open shared-memory segment /dev/shm/", name, ": ", e.what()));
  }
  return s;
}

bool Segment::remove(const std::string& name) {
  return valid_segment_name(name) && bip::shared_memory_object::remove(name.c_str());
}

bool Segment::exists(const std::string& name) {
  try {
    bip::shared_memory_object shm(bip::open_only, name.c_str(), bip::read_only);
    return true;
  } catch (const bip::interprocess_exception&) {
    return false;
  }
}

void* Segment::base() const {
  return impl_ ? impl_->region.get_address() : nullptr;
}
uint64_t Segment::size() const {
  return impl_ ? impl_->region.get_size() : 0;
}

}  // namespace k3::shm
