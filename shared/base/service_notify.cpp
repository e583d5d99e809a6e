#include "shared/base/service_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <stddef.h>
#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace k3::base {

Status notify_service(std::string_view state) {
  const char* env = std::getenv("NOTIFY_SOCKET");
  if (env == nullptr || *env == '\0') return absl::OkStatus();
  const std::string path = env;
  if (path[0] != '/' && path[0] != '@')
    return absl::InvalidArgumentError(
        cat("NOTIFY_SOCKET='", path, "' is neither an absolute path nor an abstract '@name'"));
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  if (path.size() >= sizeof(sa.sun_path))
    return absl::InvalidArgumentError(cat("NOTIFY_SOCKET='", path, "' is too long"));
  std::memcpy(sa.sun_path, path.data(), path.size());
  // An abstract address: a leading NUL, and its length is exactly the name's.
  if (path[0] == '@') sa.sun_path[0] = '\0';
  const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + path.size() +
                                               (path[0] == '@' ? 0 : 1));
  const int fd = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(cat("socket for NOTIFY_SOCKET: ", std::strerror(errno)));
  iovec iov{const_cast<char*>(state.data()), state.size()};
  msghdr mh{};
  mh.msg_name = &sa;
  mh.msg_namelen = len;
  mh.msg_iov = &iov;
  mh.msg_iovlen = 1;
  ssize_t n;
  do {
    n = ::sendmsg(fd, &mh, MSG_NOSIGNAL);
  } while (n < 0 && errno == EINTR);
  const int err = errno;
  ::close(fd);
  if (n < 0)
    return absl::UnavailableError(
        cat("cannot notify the service manager at NOTIFY_SOCKET=", path, ": ", std::strerror(err)));
  return absl::OkStatus();
}

Status notify_ready(std::string_view status) {
  return notify_service(cat("READY=1\nSTATUS=", status));
}

Status notify_status(std::string_view status) {
  return notify_service(cat("STATUS=", status));
}

Status notify_extend_timeout(double seconds, std::string_view status) {
  const auto usec = static_cast<uint64_t>(seconds * 1e6);
  return notify_service(status.empty() ? cat("EXTEND_TIMEOUT_USEC=", usec)
                                       : cat("EXTEND_TIMEOUT_USEC=", usec, "\nSTATUS=", status));
}

Status notify_stopping() {
  return notify_service("STOPPING=1\nSTATUS=stopping");
}

}  // namespace k3::base
