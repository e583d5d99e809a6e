#include "tests/faults/raw_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

namespace k3::faults_test {
namespace {

int connect_local(int port, std::string* error) {
  const int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    *error = std::string("socket: ") + std::strerror(errno);
    return -1;
  }
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  sa.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) != 0) {
    *error = std::string("connect: ") + std::strerror(errno);
    ::close(fd);
    return -1;
  }
  return fd;
}

bool write_all(int fd, const std::string& s) {
  size_t done = 0;
  while (done < s.size()) {
    const ssize_t n = ::send(fd, s.data() + done, s.size() - done, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    done += static_cast<size_t>(n);
  }
  return true;
}

std::string request_text(const std::string& method, const std::string& path,
                         const std::string& body) {
  return method + " " + path +
         " HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\nContent-Type: "
         "application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n\r\n" + body;
}

// Undoes chunked transfer encoding as far as `raw` goes; true once the last
// chunk arrived.
bool dechunk(const std::string& raw, std::string* out) {
  out->clear();
  size_t p = 0;
  for (;;) {
    const size_t eol = raw.find("\r\n", p);
    if (eol == std::string::npos) return false;
    const size_t len = std::strtoul(raw.substr(p, eol - p).c_str(), nullptr, 16);
    if (len == 0) return true;
    if (raw.size() < eol + 2 + len) {
      out->append(raw, eol + 2, raw.size() - (eol + 2));
      return false;
    }
    out->append(raw, eol + 2, len);
    p = eol + 2 + len + 2;
    if (p > raw.size()) return false;
  }
}

}  // namespace

HttpReply http_exchange(int port, const std::string& method, const std::string& path,
                        const std::string& body, double timeout_s,
                        const std::function<bool(const std::string&)>& on_body) {
  HttpReply r;
  const int fd = connect_local(port, &r.error);
  if (fd < 0) return r;
  if (!write_all(fd, request_text(method, path, body))) {
    // The server may answer before reading the whole body (413): read on.
    r.error = std::string("write: ") + std::strerror(errno);
  }
  std::string raw;
  size_t head_end = std::string::npos;
  bool chunked = false;
  long long length = -1;
  char buf[16384];
  for (;;) {
    pollfd pfd{fd, POLLIN, 0};
    const int pr = ::poll(&pfd, 1, static_cast<int>(timeout_s * 1000));
    if (pr == 0) {
      r.error = "timed out waiting for the server";
      break;
    }
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      r.error = std::string("read: ") + std::strerror(errno);
      break;
    }
    if (n == 0) break;  // closed
    raw.append(buf, static_cast<size_t>(n));
    if (head_end == std::string::npos) {
      head_end = raw.find("\r\n\r\n");
      if (head_end == std::string::npos) continue;
      if (raw.rfind("HTTP/1.", 0) == 0 && raw.size() > 12) r.status = std::atoi(raw.c_str() + 9);
      std::string head = raw.substr(0, head_end);
      for (char& c : head) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      chunked = head.find("transfer-encoding: chunked") != std::string::npos;
      if (size_t cl = head.find("content-length:"); cl != std::string::npos)
        length = std::atoll(head.c_str() + cl + 15);
    }
    const std::string payload = raw.substr(head_end + 4);
    if (chunked) {
      r.complete = dechunk(payload, &r.body);
    } else {
      r.body = payload;
      r.complete = length >= 0 && static_cast<long long>(payload.size()) >= length;
    }
    if (r.complete) break;
    if (on_body && !on_body(r.body)) break;
  }
  if (head_end != std::string::npos && !chunked && length < 0) r.complete = true;  // until close
  if (r.complete) r.error.clear();
  ::close(fd);
  return r;
}

bool http_send_and_hang_up(int port, const std::string& path, const std::string& body) {
  std::string error;
  const int fd = connect_local(port, &error);
  if (fd < 0) return false;
  const bool ok = write_all(fd, request_text("POST", path, body));
  ::close(fd);
  return ok;
}

}  // namespace k3::faults_test
