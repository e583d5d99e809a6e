// RAII file descriptor with checked positional reads and writes.
#pragma once

#include <sys/types.h>
#include <cstddef>

#include <cstdint>
#include <string>

#include "shared/status.h"

namespace k3::base {

// Owns one fd. Move-only. Not thread-safe to move, but pread/pwrite on one
// File from several threads is safe (positional I/O).
class File {
 public:
  File() = default;
  ~File();
  File(File&& o) noexcept;
  File& operator=(File&& o) noexcept;
  File(const File&) = delete;
  File& operator=(const File&) = delete;

  // Opens an existing file read-only (the model directory is never written).
  static StatusOr<File> open_read(const std::string& path, int extra_flags = 0);
  // Creates a new file for writing with exactly `mode` (whatever the umask).
  // Fails if the path exists, a symlink included (O_EXCL | O_NOFOLLOW): a
  // link planted where a temporary goes cannot redirect the write. Callers
  // remove a stale file of their own first.
  static StatusOr<File> create(const std::string& path, mode_t mode = 0644);
  // Opens a file for writing without truncating it, creating it if missing
  // (mode 0644): for resuming an interrupted write.
  static StatusOr<File> open_write(const std::string& path);

  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  uint64_t size() const;
  // Reads exactly n bytes at offset, or returns an error naming the file.
  Status pread_exact(void* dst, size_t n, uint64_t offset) const;
  // The whole file, refused when it is larger than `max_bytes`.
  StatusOr<std::string> read_all(size_t max_bytes) const;
  Status pwrite_all(const void* src, size_t n, uint64_t offset) const;
  Status truncate(uint64_t size) const;
  Status close();

 private:
  int fd_ = -1;
  std::string path_;
};

// Whole-file read with a size cap (config.json, index files: untrusted).
// Only a regular file is read: a FIFO or a device is refused, never waited on.
StatusOr<std::string> read_small_file(const std::string& path, size_t max_bytes = 64u << 20);

// read_small_file for a file holding secrets (API keys, tokens): refused with
// PermissionDenied, naming the file, its mode and the chmod that fixes it,
// when its mode has any of the `forbidden` bits (e.g. S_IRWXO: readable by
// other users). The mode is that of the file opened, not of the path.
StatusOr<std::string> read_secret_file(const std::string& path, mode_t forbidden,
                                       size_t max_bytes = 1u << 20);

// A file mode as error messages spell it: "0640" (permission and special
// bits, four octal digits).
std::string octal_mode(mode_t mode);

// Writes a file atomically: a temporary in the same directory (created anew
// with `mode`, less the umask), fsync, rename. 0600 for what only its user
// should read (a saved conversation).
Status write_file_atomic(const std::string& path, std::string_view content, mode_t mode = 0644);

}  // namespace k3::base
