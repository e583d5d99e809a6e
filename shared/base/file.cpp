#include "shared/base/file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

namespace k3::base {

File::~File() {
  if (fd_ >= 0) ::close(fd_);
}

File::File(File&& o) noexcept : fd_(o.fd_), path_(std::move(o.path_)) {
  o.fd_ = -1;
}

File& File::operator=(File&& o) noexcept {
  if (this != &o) {
    if (fd_ >= 0) ::close(fd_);
    fd_ = o.fd_;
    path_ = std::move(o.path_);
    o.fd_ = -1;
  }
  return *this;
}

StatusOr<File> File::open_read(const std::string& path, int extra_flags) {
  // O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer
  // (a --topology naming a FIFO hung the gateway at start); it is refused
  // below, and for a regular file the flag changes nothing.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | extra_flags);
  if (fd < 0) {
    int e = errno;
    std::string msg = cat(path, ": cannot open: ", std::strerror(e));
    return e == ENOENT ? absl::NotFoundError(msg) : absl::PermissionDeniedError(msg);
  }
  struct stat st;
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return absl::InvalidArgumentError(cat(path, ": not a regular file"));
  }
  // A regular file: reads block as usual (FUSE filesystems see the flag).
  ::fcntl(fd, F_SETFL, ::fcntl(fd, F_GETFL) & ~O_NONBLOCK);
  File f;
  f.fd_ = fd;
  f.path_ = path;
  return f;
}

StatusOr<File> File::create(const std::string& path, mode_t mode) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, mode);
  if (fd < 0)
    return absl::PermissionDeniedError(cat(path, ": cannot create: ", std::strerror(errno)));
  File f;
  f.fd_ = fd;
  f.path_ = path;
  // The umask took bits off; a filesystem without modes (ENOSYS, ENOTSUP)
  // keeps what it has.
  if (::fchmod(fd, mode) != 0 && errno != ENOSYS && errno != ENOTSUP)
    return absl::PermissionDeniedError(cat(path, ": cannot chmod: ", std::strerror(errno)));
  return f;
}

StatusOr<File> File::open_write(const std::string& path) {
  int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  if (fd < 0)
    return absl::PermissionDeniedError(
        cat(path, ": cannot open for writing: ", std::strerror(errno)));
  File f;
  f.fd_ = fd;
  f.path_ = path;
  return f;
}

Status File::truncate(uint64_t size) const {
  if (::ftruncate(fd_, static_cast<off_t>(size)) != 0)
    return absl::InternalError(cat(path_, ": cannot truncate: ", std::strerror(errno)));
  return absl::OkStatus();
}

uint64_t File::size() const {
  struct stat st;
  if (fd_ < 0 || ::fstat(fd_, &st) != 0) return 0;
  return static_cast<uint64_t>(st.st_size);
}

Status File::pread_exact(void* dst, size_t n, uint64_t offset) const {
  char* p = static_cast<char*>(dst);
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pread(fd_, p + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return absl::DataLossError(cat(path_, ": read of ", n, " bytes at offset ", offset,
                                     " failed: ", std::strerror(errno)));
    }
    if (r == 0)
      return absl::DataLossError(
          cat(path_, ": unexpected end of file reading ", n, " bytes at offset ", offset));
    done += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

Status File::pwrite_all(const void* src, size_t n, uint64_t offset) const {
  const char* p = static_cast<const char*>(src);
  size_t done = 0;
  while (done < n) {
    ssize_t r = ::pwrite(fd_, p + done, n - done, static_cast<off_t>(offset + done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return absl::InternalError(cat(path_, ": write failed: ", std::strerror(errno)));
    }
    done += static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

Status File::close() {
  if (fd_ < 0) return absl::OkStatus();
  int r = ::close(fd_);
  fd_ = -1;
  if (r != 0) return absl::InternalError(cat(path_, ": close failed: ", std::strerror(errno)));
  return absl::OkStatus();
}

StatusOr<std::string> read_small_file(const std::string& path, size_t max_bytes) {
  K3_ASSIGN_OR_RETURN(File f, File::open_read(path));
  return f.read_all(max_bytes);
}

StatusOr<std::string> read_secret_file(const std::string& path, mode_t forbidden,
                                       size_t max_bytes) {
  K3_ASSIGN_OR_RETURN(File f, File::open_read(path));
  struct stat st;
  if (::fstat(f.fd(), &st) != 0)
    return absl::PermissionDeniedError(cat(path, ": cannot stat: ", std::strerror(errno)));
  if (st.st_mode & forbidden) {
    char fixed[8];
    const std::string mode = octal_mode(st.st_mode);
    std::snprintf(fixed, sizeof fixed, "%o", static_cast<unsigned>(st.st_mode & 0777 & ~forbidden));
    return absl::PermissionDeniedError(
        cat(path, ": holds secrets but its mode is ", mode,
            (forbidden & S_IRWXG) ? " (readable by its group or others)" : " (readable by others)",
            "; chmod ", fixed, " it"));
  }
  return f.read_all(max_bytes);
}

StatusOr<std::string> File::read_all(size_t max_bytes) const {
  uint64_t size = this->size();
  if (size > max_bytes)
    return absl::InvalidArgumentError(
        cat(path_, ": ", size, " bytes, larger than the limit of ", max_bytes));
  std::string s(size, '\0');
  K3_RETURN_IF_ERROR(pread_exact(s.data(), size, 0));
  return s;
}

std::string octal_mode(mode_t mode) {
  char text[8];
  std::snprintf(text, sizeof text, "%04o", static_cast<unsigned>(mode & 07777));
  return text;
}

Status write_file_atomic(const std::string& path, std::string_view content, mode_t mode) {
  std::string tmp = cat(path, ".tmp.", ::getpid());
  ::unlink(tmp.c_str());  // a stale temporary would keep its own mode
  {
    K3_ASSIGN_OR_RETURN(File f, File::create(tmp, mode));
    K3_RETURN_IF_ERROR(f.pwrite_all(content.data(), content.size(), 0));
    if (::fsync(f.fd()) != 0)
      return absl::InternalError(cat(tmp, ": fsync failed: ", std::strerror(errno)));
    K3_RETURN_IF_ERROR(f.close());
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int e = errno;
    ::unlink(tmp.c_str());
    return absl::InternalError(cat(path, ": rename failed: ", std::strerror(e)));
  }
  return absl::OkStatus();
}

}  // namespace k3::base
