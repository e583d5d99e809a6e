// A service manager's end of the notify protocol for a test: a unix datagram
// socket (a file under a directory, or an "@name" in the abstract namespace)
// that $NOTIFY_SOCKET can name, and its messages as they arrive. PID 1 here is
// not systemd: this is how a test sees what a daemon would tell it.
#pragma once

#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstring>
#include <string>

namespace k3::testing {

class NotifySocket {
 public:
  // `address`: an absolute path, or "@name" for the abstract namespace.
  explicit NotifySocket(std::string address) : address_(std::move(address)) {
    fd_ = ::socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    sockaddr_un sa{};
    sa.sun_family = AF_UNIX;
    std::memcpy(sa.sun_path, address_.data(), address_.size());
    if (address_[0] == '@') sa.sun_path[0] = '\0';
    const socklen_t len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + address_.size() +
                                                 (address_[0] == '@' ? 0 : 1));
    ok_ = fd_ >= 0 && ::bind(fd_, reinterpret_cast<sockaddr*>(&sa), len) == 0;
  }
  ~NotifySocket() {
    if (fd_ >= 0) ::close(fd_);
    if (address_[0] == '/') ::unlink(address_.c_str());
  }
  NotifySocket(const NotifySocket&) = delete;
  NotifySocket& operator=(const NotifySocket&) = delete;

  bool ok() const { return ok_; }
  const std::string& address() const { return address_; }

  // The next message, or "" when none arrives within `seconds`.
  std::string receive(double seconds) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(seconds * 1000)) != 1) return "";
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    return n > 0 ? std::string(buf, static_cast<size_t>(n)) : "";
  }

  // Receives until a message containing `part` arrives (returned, with every
  // message before it appended to `*before` when given) or `seconds` pass ("").
  std::string receive_until(const std::string& part, double seconds,
                            std::string* before = nullptr) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (std::chrono::steady_clock::now() < deadline) {
      const double left =
          std::chrono::duration<double>(deadline - std::chrono::steady_clock::now()).count();
      std::string m = receive(left > 0 ? left : 0);
      if (m.find(part) != std::string::npos) return m;
      if (before != nullptr && !m.empty()) *before += m + "\n---\n";
    }
    return "";
  }

 private:
  std::string address_;
  int fd_ = -1;
  bool ok_ = false;
};

}  // namespace k3::testing
