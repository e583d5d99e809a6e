// A hugetlbfs mount for a test: raises /proc/sys/vm/nr_hugepages by `pages`
// 2 MiB pages, mounts hugetlbfs on a fresh directory, and on destruction
// unmounts it and puts nr_hugepages back. Tests holding one are serialized
// across processes by a lock file (nr_hugepages is machine-wide). When the
// machine cannot (not root, no hugepages in the kernel, no memory for them,
// no mount permission), `skip_reason` says why and nothing is changed.
// Before it unmounts, the destructor waits (up to 10 s) for the mount's pages
// to come back: a process that registered them with io_uring holds them until
// the kernel tears its ring down, after the process has exited, and the next
// test must not see them come back under its feet.
#pragma once

#include <fcntl.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <sys/statfs.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <thread>

namespace k3::testing {

class HugetlbfsMount {
 public:
  static constexpr const char* kNrHugepages = "/proc/sys/vm/nr_hugepages";

  HugetlbfsMount(const std::string& dir, int pages) : dir_(dir), pages_(pages) {
    if (::geteuid() != 0) {
      skip_reason = "needs root (raises /proc/sys/vm/nr_hugepages and mounts hugetlbfs)";
      return;
    }
    if (!std::filesystem::exists("/sys/kernel/mm/hugepages/hugepages-2048kB")) {
      skip_reason = "this kernel has no 2 MiB hugepages (/sys/kernel/mm/hugepages)";
      return;
    }
    lock_fd_ = ::open("/tmp/k3test-hugepages.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (lock_fd_ >= 0) ::flock(lock_fd_, LOCK_EX);
    old_pages_ = read_int(kNrHugepages);
    const long free_before = meminfo("HugePages_Free:");
    if (old_pages_ < 0 || !write_int(kNrHugepages, old_pages_ + pages)) {
      skip_reason = std::string("cannot write ") + kNrHugepages + ": " + std::strerror(errno);
      return;
    }
    raised_ = true;
    if (meminfo("HugePages_Free:") < free_before + pages) {
      skip_reason = "the kernel could not allocate " + std::to_string(pages) +
                    " hugepages (memory too fragmented?)";
      return;
    }
    std::filesystem::create_directories(dir_);
    const std::string opts = "pagesize=2M,mode=0700,size=" + std::to_string(pages * 2) + "M";
    if (::mount("k3test", dir_.c_str(), "hugetlbfs", 0, opts.c_str()) != 0) {
      skip_reason = std::string("cannot mount hugetlbfs on ") + dir_ + ": " + std::strerror(errno);
      return;
    }
    mounted_ = true;
  }

  ~HugetlbfsMount() {
    if (mounted_) {
      wait_until_all_free(std::chrono::seconds(10));
      ::umount2(dir_.c_str(), MNT_DETACH);
    }
    if (raised_) write_int(kNrHugepages, old_pages_);
    if (lock_fd_ >= 0) ::close(lock_fd_);  // releases the lock
  }

  HugetlbfsMount(const HugetlbfsMount&) = delete;
  HugetlbfsMount& operator=(const HugetlbfsMount&) = delete;

  bool ok() const { return mounted_; }
  const std::string& dir() const { return dir_; }
  long nr_hugepages_before() const { return old_pages_; }

  // The mount's free pages, from its own accounting (statfs): a page comes
  // back when the kernel frees it, not when its file is unlinked. -1 when
  // not mounted.
  long free_pages() const {
    struct statfs sf {};
    if (!mounted_ || ::statfs(dir_.c_str(), &sf) != 0) return -1;
    return static_cast<long>(sf.f_bfree);
  }

  // Waits up to `timeout` for every page of the mount to be free; whether
  // they all are.
  bool wait_until_all_free(std::chrono::milliseconds timeout) const {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (free_pages() != pages_) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return true;
  }

  // A "Key:   N" figure of /proc/meminfo (-1 when absent).
  static long meminfo(const std::string& key) {
    std::ifstream f("/proc/meminfo");
    std::string k;
    long v = -1;
    while (f >> k) {
      if (k == key) {
        f >> v;
        return v;
      }
      f.ignore(1 << 12, '\n');
    }
    return -1;
  }
  static long read_int(const std::string& path) {
    std::ifstream f(path);
    long v = -1;
    f >> v;
    return f ? v : -1;
  }

  std::string skip_reason;

 private:
  static bool write_int(const std::string& path, long v) {
    std::ofstream f(path);
    f << v << "\n";
    f.flush();
    return static_cast<bool>(f);
  }

  std::string dir_;
  int pages_ = 0;
  int lock_fd_ = -1;
  long old_pages_ = -1;
  bool raised_ = false, mounted_ = false;
};

}  // namespace k3::testing
