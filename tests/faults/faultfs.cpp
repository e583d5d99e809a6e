// faultfs: a read-only FUSE passthrough of one directory that fails chosen
// byte ranges of chosen files, for testing how readers take storage faults
// (a loop device cannot fail chosen ranges without device-mapper).
//
//   faultfs --source DIR --faults FILE MOUNTPOINT [-f] [-o OPT,...]
//
// FILE (read again whenever its inode, mtime or size changes, so a test changes the
// faults of a mounted filesystem by rewriting it; absent or empty: no faults)
// holds one fault per line, '#' starts a comment:
//
//   NAME OFFSET LENGTH eio     a read touching [OFFSET, OFFSET+LENGTH) of NAME
//                              fails with EIO
//   NAME OFFSET LENGTH short   such a read returns only the bytes before
//                              OFFSET (none when it starts inside the range)
//
// NAME is a path relative to DIR ("model-00002-of-00005.safetensors").
// Files are opened with direct_io: every read reaches faultfs (no page cache
// hides a fault or a repair) and O_DIRECT opens are accepted. Each injected
// fault is logged on stderr ("faultfs: eio NAME read OFF+LEN").
#define FUSE_USE_VERSION 31

#include <dirent.h>
#include <fcntl.h>
#include <fuse.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <sstream>
#include <string>
#include <vector>

namespace {

struct Fault {
  std::string name;
  uint64_t offset = 0, length = 0;
  bool eio = true;  // else a short read
};

struct State {
  std::string source;  // absolute
  std::string faults_file;
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
    if (!(ls >> f.offset >> f.length >> kind) || (kind != "eio" && kind != "short")) {
      std::fprintf(stderr, "faultfs: %s:%d: expected 'NAME OFFSET LENGTH eio|short', ignored\n",
                   g.faults_file.c_str(), lineno);
      continue;
    }
    while (!f.name.empty() && f.name.front() == '/') f.name.erase(0, 1);
    f.eio = kind == "eio";
    g.faults.push_back(std::move(f));
  }
  std::fprintf(stderr, "faultfs: %zu faults from %s\n", g.faults.size(), g.faults_file.c_str());
}

// The bytes of a read of [off, off+size) of `name` that may be returned:
// size when no fault applies, fewer for a short-read fault, -EIO for an EIO
// fault.
long long allowed(const char* path, off_t off, size_t size) {
  std::lock_guard<std::mutex> lock(g.mu);
  reload_faults_locked();
  const std::string name = path + 1;
  const uint64_t lo = static_cast<uint64_t>(off), hi = lo + size;
  long long keep = static_cast<long long>(size);
  for (const Fault& f : g.faults) {
    if (f.name != name || f.length == 0) continue;
    if (hi <= f.offset || lo >= f.offset + f.length) continue;
    std::fprintf(stderr, "faultfs: %s %s read %llu+%zu\n", f.eio ? "eio" : "short", name.c_str(),
                 static_cast<unsigned long long>(lo), size);
    if (f.eio) return -EIO;
    keep = std::min<long long>(keep, f.offset > lo ? static_cast<long long>(f.offset - lo) : 0);
  }
  return keep;
}

int ff_getattr(const char* path, struct stat* st, struct fuse_file_info*) {
  if (::lstat(real_path(path).c_str(), st) != 0) return -errno;
  st->st_mode &= ~static_cast<mode_t>(0222);  // read-only
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
  if ((fi->flags & O_ACCMODE) != O_RDONLY) return -EROFS;
  const int fd = ::open(real_path(path).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -errno;
  fi->fh = static_cast<uint64_t>(fd);
  fi->direct_io = 1;
  fi->keep_cache = 0;
  return 0;
}

int ff_read(const char* path, char* buf, size_t size, off_t off, struct fuse_file_info* fi) {
  const long long n = allowed(path, off, size);
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

int ff_release(const char*, struct fuse_file_info* fi) {
  ::close(static_cast<int>(fi->fh));
  return 0;
}

int ff_statfs(const char* path, struct statvfs* st) {
  return ::statvfs(real_path(path).c_str(), st) == 0 ? 0 : -errno;
}

int ff_access(const char* path, int mask) {
  if (mask & W_OK) return -EROFS;
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
  std::fprintf(stderr, "usage: %s --source DIR --faults FILE MOUNTPOINT [-f] [-o OPT,...]\n",
               argv0);
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<char*> rest = {argv[0]};
  for (int i = 1; i < argc; ++i) {
    const std::string a = argv[i];
    if ((a == "--source" || a == "--faults") && i + 1 < argc) {
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
  ops.statfs = ff_statfs;
  ops.access = ff_access;
  ops.init = ff_init;
  return fuse_main(static_cast<int>(rest.size()), rest.data(), &ops, nullptr);
}
