#include "gateway/http/peer_watch.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace k3::gateway {
namespace {

// "1.2.3.4" / "::1" and a port, as the kernel reports them.
bool same_endpoint(const sockaddr_storage& sa, const std::string& addr, int port) {
  char text[INET6_ADDRSTRLEN] = {0};
  if (sa.ss_family == AF_INET) {
    const auto* a = reinterpret_cast<const sockaddr_in*>(&sa);
    if (ntohs(a->sin_port) != port) return false;
    inet_ntop(AF_INET, &a->sin_addr, text, sizeof text);
  } else if (sa.ss_family == AF_INET6) {
    const auto* a = reinterpret_cast<const sockaddr_in6*>(&sa);
    if (ntohs(a->sin6_port) != port) return false;
    inet_ntop(AF_INET6, &a->sin6_addr, text, sizeof text);
  } else {
    return false;
  }
  return addr == text;
}

int find_socket(const std::string& local_addr, int local_port, const std::string& remote_addr,
                int remote_port) {
  DIR* d = opendir("/proc/self/fd");
  if (d == nullptr) return -1;
  int found = -1;
  while (dirent* e = readdir(d)) {
    char* end = nullptr;
    const long fd = std::strtol(e->d_name, &end, 10);
    if (end == e->d_name || *end != '\0') continue;
    struct stat st;
    if (fstat(static_cast<int>(fd), &st) != 0 || !S_ISSOCK(st.st_mode)) continue;
    sockaddr_storage local{}, peer{};
    socklen_t ll = sizeof local, pl = sizeof peer;
    if (getsockname(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&local), &ll) != 0 ||
        getpeername(static_cast<int>(fd), reinterpret_cast<sockaddr*>(&peer), &pl) != 0)
      continue;
    if (same_endpoint(local, local_addr, local_port) &&
        same_endpoint(peer, remote_addr, remote_port)) {
      found = static_cast<int>(fd);
      break;
    }
  }
  closedir(d);
  return found;
}

}  // namespace

std::function<bool()> watch_peer(const std::string& local_addr, int local_port,
                                 const std::string& remote_addr, int remote_port) {
  const int fd = find_socket(local_addr, local_port, remote_addr, remote_port);
  if (fd < 0) return [] { return true; };
  return [fd] {
    pollfd p{fd, POLLIN | POLLRDHUP, 0};
    if (poll(&p, 1, 0) <= 0) return true;
    if (p.revents & (POLLRDHUP | POLLHUP | POLLERR)) return false;
    if (p.revents & POLLIN) {
      char c;
      // 0: the peer closed. Data (a pipelined request) means it is there.
      return recv(fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) != 0;
    }
    return true;
  };
}

}  // namespace k3::gateway
