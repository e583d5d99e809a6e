#include "tools/k3ctl/link_counters.h"

#include <dirent.h>
#include <net/if.h>
#include <sched.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace k3::tools {
namespace {

int thread_count() {
  DIR* d = ::opendir("/proc/self/task");
  if (d == nullptr) return -1;
  int n = 0;
  while (const dirent* e = ::readdir(d))
    if (e->d_name[0] != '.') ++n;
  ::closedir(d);
  return n;
}

}  // namespace

Status enter_private_network_namespace() {
  const int threads = thread_count();
  if (threads != 1)
    return absl::FailedPreconditionError(
        cat("a network namespace is per thread and this process has ", threads, " threads"));
  if (::unshare(CLONE_NEWNET) != 0)
    return absl::PermissionDeniedError(
        cat("unshare(CLONE_NEWNET): ", std::strerror(errno), " (needs CAP_SYS_ADMIN)"));
  const int fd = ::socket(AF_INET, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(cat("socket: ", std::strerror(errno)));
  ifreq ifr{};
  std::strncpy(ifr.ifr_name, "lo", IFNAMSIZ - 1);
  Status st = absl::OkStatus();
  if (::ioctl(fd, SIOCGIFFLAGS, &ifr) != 0) {
    st = absl::InternalError(cat("SIOCGIFFLAGS lo: ", std::strerror(errno)));
  } else {
    ifr.ifr_flags = static_cast<short>(ifr.ifr_flags | IFF_UP);
    if (::ioctl(fd, SIOCSIFFLAGS, &ifr) != 0)
      st = absl::InternalError(cat("bringing lo up: ", std::strerror(errno)));
  }
  ::close(fd);
  return st;
}

StatusOr<LinkCounters> read_link_counters(const std::string& name) {
  std::ifstream f("/proc/self/net/dev");
  if (!f) return absl::NotFoundError("/proc/self/net/dev: cannot open");
  std::string line;
  while (std::getline(f, line)) {
    const size_t colon = line.find(':');
    if (colon == std::string::npos) continue;  // the two header lines
    const size_t b = line.find_first_not_of(' ');
    if (line.substr(b, colon - b) != name) continue;
    // Receive: bytes packets errs drop fifo frame compressed multicast;
    // then Transmit: bytes ...
    std::istringstream in(line.substr(colon + 1));
    uint64_t v[9] = {};
    for (uint64_t& x : v)
      if (!(in >> x))
        return absl::DataLossError(cat("/proc/self/net/dev: a short line for ", name));
    return LinkCounters{v[0], v[8]};
  }
  return absl::NotFoundError(cat("no interface ", name, " in /proc/self/net/dev"));
}

}  // namespace k3::tools
