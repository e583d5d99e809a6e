#include "shared/shm/segment.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstring>
#include <vector>

#include <boost/interprocess/mapped_region.hpp>
#include <boost/interprocess/shared_memory_object.hpp>

#include "shared/base/file.h"
#include "shared/base/progress.h"

namespace k3::shm {

namespace bip = boost::interprocess;

// One of two backings: a POSIX shared-memory object (a bare name), or a
// file of a --segment-dir mapped MAP_SHARED (`addr` set).
struct Segment::Impl {
  bip::shared_memory_object shm;
  bip::mapped_region region;
  void* addr = nullptr;
  uint64_t bytes = 0;
  ~Impl() {
    if (addr != nullptr) ::munmap(addr, bytes);
  }
};

namespace {

constexpr long kHugetlbfsMagic = 0x958458f6;  // linux/magic.h HUGETLBFS_MAGIC

bool is_path(const std::string& ref) {
  return !ref.empty() && ref.front() == '/';
}

std::string base_name(const std::string& ref) {
  return ref.substr(ref.rfind('/') + 1);
}

// "(its filesystem has N bytes free of M)" for fd, or "".
std::string free_space(int fd) {
  struct statvfs st {};
  if (::fstatvfs(fd, &st) != 0) return "";
  return cat(" (its filesystem has ", static_cast<uint64_t>(st.f_bavail) * st.f_frsize,
             " bytes free of ", static_cast<uint64_t>(st.f_blocks) * st.f_frsize, ")");
}

std::string errno_text() {
  return std::strerror(errno);
}

bool in_our_groups(gid_t gid) {
  if (gid == ::getegid()) return true;
  const int n = ::getgroups(0, nullptr);
  if (n <= 0) return false;
  std::vector<gid_t> groups(static_cast<size_t>(n));
  const int got = ::getgroups(n, groups.data());
  return got > 0 && std::find(groups.begin(), groups.begin() + got, gid) != groups.begin() + got;
}

}  // namespace

Status check_segment_owner(int fd, const std::string& path) {
  struct stat st {};
  if (::fstat(fd, &st) != 0)
    return absl::UnavailableError(cat("cannot stat segment ", path, ": ", std::strerror(errno)));
  if (!S_ISREG(st.st_mode))
    return absl::PermissionDeniedError(cat("segment ", path, " is not a regular file"));
  const mode_t mode = st.st_mode & 07777;
  const bool ours = st.st_uid == ::geteuid() || st.st_uid == 0;
  const bool our_group = (mode & 0070) != 0 && in_our_groups(st.st_gid);
  if (!ours && !our_group)
    return absl::PermissionDeniedError(
        cat("segment ", path, " belongs to uid ", st.st_uid, " (mode ", base::octal_mode(mode),
            "), not to this service (uid ", ::geteuid(),
            ") or root: another user may have created it first; refusing to use it (remove it "
            "as root, or give expertd and engined a --segment-dir only the service can write)"));
  if ((mode & ~static_cast<mode_t>(0660)) != 0)
    return absl::PermissionDeniedError(
        cat("segment ", path, " has mode ", base::octal_mode(mode),
            ", wider than expertd sets (0600, or 0660 for a service group): refusing to use it"));
  return absl::OkStatus();
}

namespace {

// A --segment-dir segment: create (O_EXCL) or open the file, size it,
// reserve it, map it.
StatusOr<std::unique_ptr<Segment::Impl>> map_file(const std::string& path, bool create,
                                                  uint64_t bytes, unsigned mode) {
  const int fd = create ? ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, mode)
                        : ::open(path.c_str(), O_RDWR | O_CLOEXEC | O_NOFOLLOW | O_NONBLOCK);
  if (fd < 0)
    return absl::UnavailableError(
        cat("cannot ", create ? "create" : "open", " segment ", path, ": ", errno_text()));
  auto fail = [&](Status s) {
    ::close(fd);
    if (create) ::unlink(path.c_str());
    return s;
  };
  if (!create) {
    if (Status owner = check_segment_owner(fd, path); !owner.ok()) return fail(owner);
  }
  if (create) {
    if (::fchmod(fd, mode) != 0)  // whatever the umask
      return fail(absl::UnavailableError(cat("cannot chmod segment ", path, ": ", errno_text())));
    // A hugetlbfs file is sized in whole huge pages.
    struct statfs fs {};
    if (::fstatfs(fd, &fs) == 0 && fs.f_type == kHugetlbfsMagic && fs.f_bsize > 0) {
      const uint64_t page = static_cast<uint64_t>(fs.f_bsize);
      bytes = (bytes + page - 1) / page * page;
    }
    if (::ftruncate(fd, static_cast<off_t>(bytes)) != 0)
      return fail(absl::ResourceExhaustedError(cat("cannot size segment ", path, " to ", bytes,
                                                   " bytes: ", errno_text(), free_space(fd))));
    // hugetlbfs gives up with EINTR whenever signal_pending() holds, which
    // includes task work queued for the thread (io_uring's, after a ring of
    // this thread was used): the pages it reserved stay, so asking again
    // goes on.
    int rc = 0;
    for (int tries = 0; tries < 100; ++tries) {
      rc = ::posix_fallocate(fd, 0, static_cast<off_t>(bytes));
      if (rc != EINTR) break;
    }
    if (rc != 0)
      return fail(absl::ResourceExhaustedError(
          cat("cannot reserve ", bytes, " bytes for segment ", path, ": ", std::strerror(rc),
              free_space(fd),
              "; lower --cache-gb or give the filesystem more room (hugetlbfs: raise "
              "/proc/sys/vm/nr_hugepages)")));
  } else {
    struct stat st {};
    if (::fstat(fd, &st) != 0)
      return fail(absl::UnavailableError(cat("cannot stat segment ", path, ": ", errno_text())));
    bytes = static_cast<uint64_t>(st.st_size);
  }
  void* addr =
      bytes == 0 ? MAP_FAILED : ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  if (addr == MAP_FAILED)
    return fail(absl::UnavailableError(
        cat("cannot map segment ", path, " (", bytes, " bytes): ", errno_text())));
  ::close(fd);  // the mapping keeps the file
  auto impl = std::make_unique<Segment::Impl>();
  impl->addr = addr;
  impl->bytes = bytes;
  return impl;
}

}  // namespace

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

bool valid_segment_ref(const std::string& ref) {
  if (!is_path(ref)) return valid_segment_name(ref);
  if (ref.size() > 4000 || !valid_segment_name(base_name(ref))) return false;
  for (size_t i = 0; i < ref.size();) {
    const size_t j = std::min(ref.find('/', i + 1), ref.size());
    const std::string part = ref.substr(i + 1, j - i - 1);
    if (part == "." || part == "..") return false;
    i = j;
  }
  return true;
}

std::string segment_path(const std::string& ref) {
  return is_path(ref) ? ref : "/dev/shm/" + ref;
}

std::string segment_ref(const std::string& dir, const std::string& name) {
  if (dir.empty()) return name;
  std::string d = dir;
  while (d.size() > 1 && d.back() == '/') d.pop_back();
  if (d == "/dev/shm") return name;
  return d + "/" + name;
}

StatusOr<Segment> Segment::create(const std::string& name, uint64_t bytes, unsigned mode) {
  if (!valid_segment_ref(name))
    return absl::InvalidArgumentError(cat("invalid shared-memory segment name '", name, "'"));
  if (mode != 0600 && mode != 0660)
    return absl::InvalidArgumentError(cat("segment mode ", base::octal_mode(mode),
                                          " refused: 0600 (owner) or 0660 (service group)"));
  Segment s;
  s.name_ = name;
  if (is_path(name)) {
    K3_ASSIGN_OR_RETURN(s.impl_, map_file(name, /*create=*/true, bytes, mode));
    return s;
  }
  bool created = false;  // only a segment made here is removed on failure
  try {
    auto impl = std::make_unique<Impl>();
    // Owner only: the slots hold the model's weights and the rings its
    // requests; engined runs as the same service user and maps it read-write.
    impl->shm = bip::shared_memory_object(bip::create_only, name.c_str(), bip::read_write,
                                          bip::permissions(mode));
    created = true;
    const int fd = impl->shm.get_mapping_handle().handle;
    ::fchmod(fd, mode);  // whatever the umask
    impl->shm.truncate(static_cast<bip::offset_t>(bytes));
    // Reserve every page now: a tmpfs that runs out later would SIGBUS the
    // process on first touch of a slot. posix_fallocate fails instead.
    // In 256 MiB steps, with progress: tens of GB take a while on tmpfs.
    int rc = 0;
    {
      base::Progress progress("segment /dev/shm/" + name, bytes);
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
  if (!valid_segment_ref(name))
    return absl::InvalidArgumentError(cat("invalid shared-memory segment name '", name, "'"));
  Segment s;
  s.name_ = name;
  if (is_path(name)) {
    K3_ASSIGN_OR_RETURN(s.impl_, map_file(name, /*create=*/false, 0, 0));
    return s;
  }
  try {
    auto impl = std::make_unique<Impl>();
    impl->shm = bip::shared_memory_object(bip::open_only, name.c_str(), bip::read_write);
    K3_RETURN_IF_ERROR(
        check_segment_owner(impl->shm.get_mapping_handle().handle, "/dev/shm/" + name));
    impl->region = bip::mapped_region(impl->shm, bip::read_write);
    s.impl_ = std::move(impl);
  } catch (const bip::interprocess_exception& e) {
    return absl::UnavailableError(
        cat("cannot open shared-memory segment /dev/shm/", name, ": ", e.what()));
  }
  return s;
}

bool Segment::remove(const std::string& name) {
  if (is_path(name)) return valid_segment_ref(name) && ::unlink(name.c_str()) == 0;
  return valid_segment_name(name) && bip::shared_memory_object::remove(name.c_str());
}

bool Segment::exists(const std::string& name) {
  if (is_path(name)) {
    struct stat st {};
    return valid_segment_ref(name) && ::stat(name.c_str(), &st) == 0;
  }
  try {
    bip::shared_memory_object shm(bip::open_only, name.c_str(), bip::read_only);
    return true;
  } catch (const bip::interprocess_exception&) {
    return false;
  }
}

void* Segment::base() const {
  if (!impl_) return nullptr;
  return impl_->addr != nullptr ? impl_->addr : impl_->region.get_address();
}
uint64_t Segment::size() const {
  if (!impl_) return 0;
  return impl_->addr != nullptr ? impl_->bytes : impl_->region.get_size();
}

}  // namespace k3::shm
