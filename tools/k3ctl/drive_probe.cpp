#include "tools/k3ctl/drive_probe.h"

#include <fcntl.h>
#include <linux/magic.h>
#include <sys/statfs.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <random>
#include <vector>

#include "tools/k3ctl/drive_ceiling.h"

namespace k3::tools {

namespace {

namespace fs = std::filesystem;

// The scratch file a signal handler removes: a fixed buffer (the handler
// may only make async-signal-safe calls: unlink, signal, raise).
char g_scratch_path[4096];
constexpr int kCleanupSignals[] = {SIGINT, SIGTERM, SIGHUP};

extern "C" void remove_scratch_and_reraise(int sig) {
  if (g_scratch_path[0] != '\0') ::unlink(g_scratch_path);
  std::signal(sig, SIG_DFL);
  std::raise(sig);
}

// A temporary file in a drive's directory, removed by the destructor, or by
// a cleanup signal while it exists.
class ScratchFile {
 public:
  static StatusOr<std::unique_ptr<ScratchFile>> create(const std::string& dir) {
    std::string tmpl = (fs::path(dir) / ".k3ctl-doctor-XXXXXX").string();
    if (tmpl.size() >= sizeof g_scratch_path)
      return absl::InvalidArgumentError(cat(dir, ": path too long"));
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    const int fd = ::mkstemp(buf.data());
    if (fd < 0)
      return absl::FailedPreconditionError(
          cat(dir, ": cannot create a temporary file: ", std::strerror(errno)));
    auto f = std::unique_ptr<ScratchFile>(new ScratchFile(buf.data(), fd));
    return f;
  }
  ~ScratchFile() {
    ::close(fd_);
    ::unlink(path_.c_str());
    g_scratch_path[0] = '\0';
    for (size_t i = 0; i < std::size(kCleanupSignals); ++i)
      ::sigaction(kCleanupSignals[i], &previous_[i], nullptr);
  }
  ScratchFile(const ScratchFile&) = delete;
  ScratchFile& operator=(const ScratchFile&) = delete;

  const std::string& path() const { return path_; }
  int fd() const { return fd_; }

 private:
  ScratchFile(std::string path, int fd) : path_(std::move(path)), fd_(fd) {
    std::memcpy(g_scratch_path, path_.c_str(), path_.size() + 1);
    struct sigaction sa {};
    sa.sa_handler = remove_scratch_and_reraise;
    sigemptyset(&sa.sa_mask);
    for (size_t i = 0; i < std::size(kCleanupSignals); ++i)
      ::sigaction(kCleanupSignals[i], &sa, &previous_[i]);
  }
  std::string path_;
  int fd_;
  struct sigaction previous_[std::size(kCleanupSignals)]{};
};

// Fills the scratch file with bytes no filesystem or drive can compress or
// skip, flushes it to the drive and drops it from the page cache.
Status fill(const ScratchFile& f, uint64_t bytes) {
  constexpr size_t kBlock = 4u << 20;
  std::vector<uint64_t> block(kBlock / sizeof(uint64_t));
  std::mt19937_64 rng(0x6b33);
  for (uint64_t& w : block) w = rng();
  for (uint64_t done = 0; done < bytes;) {
    block[0] = done;  // every block different
    const size_t n = static_cast<size_t>(std::min<uint64_t>(kBlock, bytes - done));
    const ssize_t w = ::pwrite(f.fd(), block.data(), n, static_cast<off_t>(done));
    if (w < 0)
      return absl::ResourceExhaustedError(cat("writing a ", bytes >> 20, " MiB temporary file in ",
                                              fs::path(f.path()).parent_path().string(), ": ",
                                              std::strerror(errno)));
    done += static_cast<uint64_t>(w);
  }
  if (::fdatasync(f.fd()) != 0)
    return absl::DataLossError(cat(f.path(), ": fdatasync: ", std::strerror(errno)));
  ::posix_fadvise(f.fd(), 0, 0, POSIX_FADV_DONTNEED);
  return absl::OkStatus();
}

// FAILED_PRECONDITION when `path` cannot be opened with O_DIRECT.
Status direct_open_check(const std::string& path, const std::string& dir) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
  if (fd >= 0) {
    ::close(fd);
    return absl::OkStatus();
  }
  return absl::FailedPreconditionError(
      cat("O_DIRECT refused on ", filesystem_name(dir), " (", std::strerror(errno), ")"));
}

}  // namespace

std::string filesystem_name(const std::string& dir) {
  struct statfs s {};
  if (::statfs(dir.c_str(), &s) != 0) return "unknown";
  switch (static_cast<uint64_t>(s.f_type)) {
    case TMPFS_MAGIC:
      return "tmpfs";
    case RAMFS_MAGIC:
      return "ramfs";
    case EXT4_SUPER_MAGIC:
      return "ext4";  // also ext2/ext3
    case XFS_SUPER_MAGIC:
      return "xfs";
    case BTRFS_SUPER_MAGIC:
      return "btrfs";
    case OVERLAYFS_SUPER_MAGIC:
      return "overlayfs";
    case NFS_SUPER_MAGIC:
      return "nfs";
    case 0x2fc12fc1:
      return "zfs";
    case 0x65735546:
      return "fuse";
    default:
      return "unknown";
  }
}

StatusOr<DriveProbe> probe_drive(const std::string& dir, const DriveProbeOptions& o) {
  DriveProbe p;
  // A directory in RAM: reads would time memory copies (where the kernel
  // lets tmpfs take O_DIRECT at all, since 6.6), not a drive.
  if (const std::string fs_name = filesystem_name(dir); fs_name == "tmpfs" || fs_name == "ramfs")
    return absl::FailedPreconditionError(
        cat(dir, " is on ", fs_name, " (RAM, not a drive; older kernels refuse it O_DIRECT)"));
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(dir, ec)) {
    if (e.path().extension() != ".safetensors" || !e.is_regular_file(ec)) continue;
    const uint64_t size = e.file_size(ec);
    if (!ec && size >= o.min_file_bytes && size > p.file_bytes) {
      p.file = e.path().string();
      p.file_bytes = size;
    }
  }
  if (ec) return absl::FailedPreconditionError(cat(dir, ": ", ec.message()));
  std::unique_ptr<ScratchFile> scratch;
  if (p.file.empty()) {
    K3_ASSIGN_OR_RETURN(scratch, ScratchFile::create(dir));
    // Before writing 256 MB: will it be readable at all?
    K3_RETURN_IF_ERROR(direct_open_check(scratch->path(), dir));
    struct statvfs s {};
    if (::statvfs(dir.c_str(), &s) == 0 &&
        static_cast<uint64_t>(s.f_bavail) * s.f_frsize < o.min_file_bytes + (64u << 20))
      return absl::ResourceExhaustedError(cat(dir, ": less than ", (o.min_file_bytes >> 20) + 64,
                                              " MiB free for a temporary test file"));
    K3_RETURN_IF_ERROR(fill(*scratch, o.min_file_bytes));
    p.file = scratch->path();
    p.file_bytes = o.min_file_bytes;
    p.temporary = true;
  } else {
    K3_RETURN_IF_ERROR(direct_open_check(p.file, dir));
  }
  // Expert-sized spans at random 4 KiB-aligned places, read in chunks.
  const uint64_t span = std::min(o.span_bytes, p.file_bytes) / 4096 * 4096;
  const uint64_t places = (p.file_bytes - span) / 4096 + 1;
  std::mt19937_64 rng(7);
  uint64_t cur = 0, end = 0;
  auto next = [&]() -> ReadChunk {
    if (cur >= end) {
      cur = (rng() % places) * 4096;
      end = cur + span;
    }
    ReadChunk c{0, cur, std::min(o.chunk_bytes, end - cur)};
    cur += c.length;
    return c;
  };
  for (int qd : {4, 16, 64}) {
    K3_ASSIGN_OR_RETURN(double g,
                        uring_read_gbps({p.file}, next, qd, o.chunk_bytes, o.seconds / 3));
    if (g > p.gbps) p.gbps = g, p.queue_depth = qd;
  }
  p.seconds = o.seconds;
  return p;
}

}  // namespace k3::tools
