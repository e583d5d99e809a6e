// faultfs: a FUSE passthrough of one directory that fails or slows chosen
// byte ranges of chosen files, for testing how readers and writers take
// storage faults (a loop device cannot fail chosen ranges without
// device-mapper). Read-only unless --writable.
//
//   faultfs --source DIR --faults FILE [--writable] MOUNTPOINT [-f] [-o OPT,...]
//
// FILE (read again whenever its inode, mtime or size changes, so a test changes the
// faults of a mounted filesystem by rewriting it; absent or empty: no faults)
// holds one fault per line, '#' starts a comment:
//
//   NAME OFFSET LENGTH eio       a read touching [OFFSET, OFFSET+LENGTH) of
//                                NAME fails with EIO
//   NAME OFFSET LENGTH short     such a read returns only the bytes before
//                                OFFSET (none when it starts inside the range)
//   NAME OFFSET LENGTH delay MS  a read or a write touching the range waits
//                                MS milliseconds first (a slow disk)
//
// NAME is a path relative to DIR ("model-00002-of-00005.safetensors"), or a
// glob of one (fnmatch(3) without flags: '*' also matches '/' and a leading
// '.'; "*.k3snap*" is every checkpoint file and its temporaries).
// --writable: files may be created, written, truncated, chmod-ed, renamed and removed,
// and directories made and removed (the writes go to DIR); without it every
// write is EROFS, as before.
// Files are opened with direct_io: every read and write reaches faultfs (no
// page cache hides a fault or a repair) and O_DIRECT opens are accepted. Each
// injected fault is logged on stderr ("faultfs: eio NAME read OFF+LEN",
// "faultfs: delay NAME write OFF+LEN MS").
#define FUSE_USE_VERSION 31

#include <dirent.h>
#include <fcntl.h>
#include <fnmatch.h>
#include <fuse.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

namespace {

enum class Kind { kEio, kShort, kDelay };

struct Fault {
  std::string name;  // a glob
  uint64_t offset = 0, length = 0;
  Kind kind = Kind::kEio;
  unsigned delay_ms = 0;  // kDelay
};

struct State {
  std::string source;  // absolute
  std::string faults_file;
  bool writable = false;
  std::mutex mu;
  struct timespec faults_mtime {};
  off_t faults_size = -1;
  ino_t faults_ino = 0;
  std::vector<Fault> faults;
};

State g;

std::string real_path(const char* path) {
  return g.source + path;  // FUSE paths start with '/'
}

// Reloads the fault table when its file changed (under g.mu).
void reload_faults_locked() {
  struct stat st {};
  if (::stat(g.faults_file.c_str(), &st) != 0) {
    g.faults.clear();
    g.faults_size = -1;
    return;
  }
  if (st.st_ino == g.faults_ino && st.st_size == g.faults_size &&
      st.st_mtim.tv_sec == g.faults_mtime.tv_sec && st.st_mtim.tv_nsec == g.faults_mtime.tv_nsec)
    return;
  g.faults_size = st.st_size;
  g.faults_ino = st.st_ino;
  g.faults_mtime = st.st_mtim;
  g.faults.clear();
  std::ifstream in(g.faults_file);
  std::string line;
  int lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (auto hash = line.find('#'); hash != std::string::npos) line.resize(hash);
    std::istringstream ls(line);
    Fault f;
    std::string kind;
    if (!(ls >> f.name)) continue;  // blank
    const bool ok = (ls >> f.offset >> f.length >> kind) &&
                    (kind == "eio" || kind == "short" || (kind == "delay" && (ls >> f.delay_ms)));
    if (!ok) {
      std::fprintf(stderr,
                   "faultfs: %s:%d: expected 'NAME OFFSET LENGTH eio|short' or 'NAME OFFSET "
                   "LENGTH delay MS', ignored\n",
                   g.faults_file.c_str(), lineno);
      continue;
    }
    while (!f.name.empty() && f.name.front() == '/') f.name.erase(0, 1);
    f.kind = kind == "eio" ? Kind::kEio : kind == "short" ? Kind::kShort : Kind::kDelay;
    g.faults.push_back(std::move(f));
  }
  std::fprintf(stderr, "faultfs: %zu faults from %s\n", g.faults.size(), g.faults_file.c_str());
}

// The bytes of a read (or write) of [off, off+size) of `name` that may be
// done: size when no fault applies, fewer for a short-read fault, -EIO for an
// EIO fault (reads only). A delay fault sleeps first (outside the lock: other
// files go on).
long long allowed(const char* path, off_t off, size_t size, bool write) {
  const std::string name = path + 1;
  const uint64_t lo = static_cast<uint64_t>(off), hi = lo + size;
  long long keep = static_cast<long long>(size);
  unsigned delay_ms = 0;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    reload_faults_locked();
    for (const Fault& f : g.faults) {
      if (f.length == 0 || ::fnmatch(f.name.c_str(), name.c_str(), 0) != 0) continue;
      if (hi <= f.offset || lo >= f.offset + f.length) continue;
      if (f.kind == Kind::kDelay) {
        std::fprintf(stderr, "faultfs: delay %s %s %llu+%zu %u\n", name.c_str(),
                     write ? "write" : "read", static_cast<unsigned long long>(lo), size,
                     f.delay_ms);
        delay_ms = std::max(delay_ms, f.delay_ms);
        continue;
      }
      if (write) continue;  // eio and short are read faults
      std::fprintf(stderr, "faultfs: %s %s read %llu+%zu\n", f.kind == Kind::kEio ? "eio" : "short",
                   name.c_str(), static_cast<unsigned long long>(lo), size);
      if (f.kind == Kind::kEio) return -EIO;
      keep = std::min<long long>(keep, f.offset > lo ? static_cast<long long>(f.offset - lo) : 0);
    }
  }
  if (delay_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
  return keep;
}

int ff_getattr(const char* path, struct stat* st, struct fuse_file_info*) {
  if (::lstat(real_path(path).c_str(), st) != 0) return -errno;
  if (!g.writable) st->st_mode &= ~static_cast<mode_t>(0222);  // read-only
  return 0;
}

int ff_readdir(const char* path, void* buf, fuse_fill_dir_t fill, off_t, struct fuse_file_info*,
               enum fuse_readdir_flags) {
  DIR* d = ::opendir(real_path(path).c_str());
  if (d == nullptr) return -errno;
  while (struct dirent* e = ::readdir(d)) {
    struct stat st {};
    st.st_ino = e->d_ino;
    st.st_mode = static_cast<mode_t>(e->d_type) << 12;
    if (fill(buf, e->d_name, &st, 0, static_cast<fuse_fill_dir_flags>(0)) != 0) break;
  }
  ::closedir(d);
  return 0;
}

int ff_open(const char* path, struct fuse_file_info* fi) {
  const int mode = fi->flags & O_ACCMODE;
  if (mode != O_RDONLY && !g.writable) return -EROFS;
  const int fd = ::open(real_path(path).c_str(), mode | (fi->flags & O_TRUNC) | O_CLOEXEC);
  if (fd < 0) return -errno;
  fi->fh = static_cast<uint64_t>(fd);
  fi->direct_io = 1;
  fi->keep_cache = 0;
  return 0;
}

int ff_read(const char* path, char* buf, size_t size, off_t off, struct fuse_file_info* fi) {
  const long long n = allowed(path, off, size, /*write=*/false);
  if (n < 0) return static_cast<int>(n);
  size_t done = 0;
  while (done < static_cast<size_t>(n)) {
    const ssize_t r = ::pread(static_cast<int>(fi->fh), buf + done, static_cast<size_t>(n) - done,
                              off + static_cast<off_t>(done));
    if (r < 0) {
      if (errno == EINTR) continue;
      return done > 0 ? static_cast<int>(done) : -errno;
    }
    if (r == 0) break;
    done += static_cast<size_t>(r);
  }
  return static_cast<int>(done);
}

int ff_create(const char* path, mode_t mode, struct fuse_file_info* fi) {
  if (!g.writable) return -EROFS;
  const int fd = ::open(real_path(path).c_str(),
                        (fi->flags & ~(O_DIRECT | O_NONBLOCK)) | O_CREAT | O_CLOEXEC, mode);
  if (fd < 0) return -errno;
  fi->fh = static_cast<uint64_t>(fd);
  fi->direct_io = 1;
  fi->keep_cache = 0;
  return 0;
}

int ff_write(const char* path, const char* buf, size_t size, off_t off, struct fuse_file_info* fi) {
  if (!g.writable) return -EROFS;
  allowed(path, off, size, /*write=*/true);  // delays only
  size_t done = 0;
  while (done < size) {
    const ssize_t w =
        ::pwrite(static_cast<int>(fi->fh), buf + done, size - done, off + static_cast<off_t>(done));
    if (w < 0) {
      if (errno == EINTR) continue;
      return done > 0 ? static_cast<int>(done) : -errno;
    }
    done += static_cast<size_t>(w);
  }
  return static_cast<int>(done);
}

int ff_truncate(const char* path, off_t size, struct fuse_file_info* fi) {
  if (!g.writable) return -EROFS;
  const int r = fi != nullptr ? ::ftruncate(static_cast<int>(fi->fh), size)
                              : ::truncate(real_path(path).c_str(), size);
  return r == 0 ? 0 : -errno;
}

int ff_rename(const char* from, const char* to, unsigned int flags) {
  if (!g.writable) return -EROFS;
  if (flags != 0) return -EINVAL;  // RENAME_NOREPLACE / EXCHANGE: not needed
  return ::rename(real_path(from).c_str(), real_path(to).c_str()) == 0 ? 0 : -errno;
}

int ff_unlink(const char* path) {
  if (!g.writable) return -EROFS;
  return ::unlink(real_path(path).c_str()) == 0 ? 0 : -errno;
}

int ff_mkdir(const char* path, mode_t mode) {
  if (!g.writable) return -EROFS;
  return ::mkdir(real_path(path).c_str(), mode) == 0 ? 0 : -errno;
}

int ff_rmdir(const char* path) {
  if (!g.writable) return -EROFS;
  return ::rmdir(real_path(path).c_str()) == 0 ? 0 : -errno;
}

int ff_chmod(const char* path, mode_t mode, struct fuse_file_info* fi) {
  if (!g.writable) return -EROFS;
  const int r = fi != nullptr ? ::fchmod(static_cast<int>(fi->fh), mode)
                              : ::chmod(real_path(path).c_str(), mode);
  return r == 0 ? 0 : -errno;
}

int ff_utimens(const char* path, const struct timespec tv[2], struct fuse_file_info*) {
  if (!g.writable) return -EROFS;
  return ::utimensat(AT_FDCWD, real_path(path).c_str(), tv, AT_SYMLINK_NOFOLLOW) == 0 ? 0 : -errno;
}

int ff_fsync(const char*, int datasync, struct fuse_file_info* fi) {
  const int fd = static_cast<int>(fi->fh);
  return (datasync ? ::fdatasync(fd) : ::fsync(fd)) == 0 ? 0 : -errno;
}

int ff_release(const char*, struct fuse_file_info* fi) {
  ::close(static_cast<int>(fi->fh));
  return 0;
}

int ff_statfs(const char* path, struct statvfs* st) {
  return ::statvfs(real_path(path).c_str(), st) == 0 ? 0 : -errno;
}

int ff_access(const char* path, int mask) {
  if ((mask & W_OK) && !g.writable) return -EROFS;
  return ::access(real_path(path).c_str(), mask) == 0 ? 0 : -errno;
}

void* ff_init(struct fuse_conn_info*, struct fuse_config* cfg) {
  cfg->direct_io = 1;
  cfg->kernel_cache = 0;
  cfg->attr_timeout = 0;
  cfg->entry_timeout = 0;
  return nullptr;
}

int usage(const char* argv0) {
  std::fprintf(stderr,
               "usage: %s --source DIR --faults FILE [--writable] MOUNTPOINT [-f] [-o OPT,...]\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if (a == "--writable") {
      g.writable = true;
    } else if ((a == "--source" || a == "--faults") && i + 1 < argc) {
      (a == "--source" ? g.source : g.faults_file) = argv[++i];
    } else if (a == "--source" || a == "--faults") {
      std::fprintf(stderr, "faultfs: %s needs a value\n", a.c_str());
      return usage(argv[0]);
    } else {
      rest.push_back(argv[i]);
    }
  }
  if (g.source.empty() || g.faults_file.empty()) return usage(argv[0]);
  char* abs = ::realpath(g.source.c_str(), nullptr);
  if (abs == nullptr) {
    std::fprintf(stderr, "faultfs: --source %s: %s\n", g.source.c_str(), std::strerror(errno));
    return 1;
  }
  g.source = abs;
  std::free(abs);
  // fuse_main leaves the working directory: the fault file's path is made
  // absolute first (it need not exist yet).
  if (g.faults_file.front() != '/') {
    char cwd[4096];
    if (::getcwd(cwd, sizeof cwd) == nullptr) {
      std::fprintf(stderr, "faultfs: getcwd: %s\n", std::strerror(errno));
      return 1;
    }
    g.faults_file = std::string(cwd) + "/" + g.faults_file;
  }
  struct stat st {};
  if (::stat(g.source.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    std::fprintf(stderr, "faultfs: --source %s is not a directory\n", g.source.c_str());
    return 1;
  }
  fuse_operations ops{};
  ops.getattr = ff_getattr;
  ops.readdir = ff_readdir;
  ops.open = ff_open;
  ops.read = ff_read;
  ops.release = ff_release;
  ops.create = ff_create;
  ops.write = ff_write;
  ops.truncate = ff_truncate;
  ops.rename = ff_rename;
  ops.unlink = ff_unlink;
  ops.mkdir = ff_mkdir;
  ops.rmdir = ff_rmdir;
  ops.chmod = ff_chmod;
  ops.utimens = ff_utimens;
  ops.fsync = ff_fsync;
  ops.statfs = ff_statfs;
  ops.access = ff_access;
  ops.init = ff_init;
  return fuse_main(static_cast<int>(rest.size()), rest.data(), &ops, nullptr);
}
