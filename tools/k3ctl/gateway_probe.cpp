#include "tools/k3ctl/gateway_probe.h"
#include "shared/base/host_port.h"

#include <fcntl.h>
#include <netdb.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>

namespace k3::tools {
namespace {

namespace v1 = k3serve::v1;
using Clock = std::chrono::steady_clock;

// An fd closed on scope exit.
struct Fd {
  int fd = -1;
  ~Fd() {
    if (fd >= 0) ::close(fd);
  }
};

int remaining_ms(Clock::time_point deadline) {
  const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
  return left.count() > 0 ? static_cast<int>(left.count()) : 0;
}

// Waits for `events` on fd; false on timeout.
bool wait_for(int fd, short events, Clock::time_point deadline) {
  pollfd p{fd, events, 0};
  for (;;) {
    const int n = ::poll(&p, 1, remaining_ms(deadline));
    if (n < 0 && errno == EINTR) continue;
    return n > 0;
  }
}

// Non-blocking connect to one address; 0 or an errno.
int connect_one(int fd, const sockaddr* addr, socklen_t len, Clock::time_point deadline) {
  if (::connect(fd, addr, len) == 0) return 0;
  if (errno != EINPROGRESS) return errno;
  if (!wait_for(fd, POLLOUT, deadline)) return ETIMEDOUT;
  int err = 0;
  socklen_t err_len = sizeof err;
  ::getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &err_len);
  return err;
}

// A connected socket to address, or -1 with *err set (0: address not understood).
int connect_address(std::string address, Clock::time_point deadline, int* err) {
  *err = 0;
  if (address.rfind("unix:", 0) == 0) {
    std::string path = address.substr(5);
    if (path.rfind("//", 0) == 0) path = path.substr(2);
    sockaddr_un sun{};
    sun.sun_family = AF_UNIX;
    if (path.empty() || path.size() >= sizeof sun.sun_path) return -1;
    std::memcpy(sun.sun_path, path.data(), path.size());
    const int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) return -1;
    *err = connect_one(fd, reinterpret_cast<sockaddr*>(&sun), sizeof sun, deadline);
    if (*err == 0) return fd;
    ::close(fd);
    return -1;
  }
  for (const char* prefix : {"dns:///", "ipv4:", "ipv6:"})
    if (address.rfind(prefix, 0) == 0) address = address.substr(std::strlen(prefix));
  const StatusOr<base::HostPort> hp = base::parse_host_port(address);
  if (!hp.ok()) return -1;
  const std::string& host = hp->host;
  const std::string port = std::to_string(hp->port);
  addrinfo hints{};
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), port.c_str(), &hints, &found) != 0) return -1;
  int fd = -1;
  for (addrinfo* a = found; a != nullptr && fd < 0; a = a->ai_next) {
    fd = ::socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    *err = connect_one(fd, a->ai_addr, a->ai_addrlen, deadline);
    if (*err != 0) {
      ::close(fd);
      fd = -1;
    }
  }
  ::freeaddrinfo(found);
  return fd;
}

// Whether a TLS handshake (any certificate accepted: only the protocol is in
// question) completes with the server at `address`.
bool tls_handshake_completes(const std::string& address, Clock::time_point deadline) {
  int err = 0;
  Fd sock{connect_address(address, deadline, &err)};
  if (sock.fd < 0) return false;
  std::unique_ptr<SSL_CTX, decltype(&SSL_CTX_free)> ctx(SSL_CTX_new(TLS_client_method()),
                                                        &SSL_CTX_free);
  if (!ctx) return false;
  SSL_CTX_set_verify(ctx.get(), SSL_VERIFY_NONE, nullptr);
  std::unique_ptr<SSL, decltype(&SSL_free)> ssl(SSL_new(ctx.get()), &SSL_free);
  if (!ssl) return false;
  static constexpr unsigned char kAlpn[] = {2, 'h', '2'};  // gRPC's protocol
  SSL_set_alpn_protos(ssl.get(), kAlpn, sizeof kAlpn);
  SSL_set_fd(ssl.get(), sock.fd);
  // The socket is non-blocking: drive the handshake with poll to the deadline.
  for (;;) {
    const int rc = SSL_connect(ssl.get());
    if (rc == 1) return true;
    const int why = SSL_get_error(ssl.get(), rc);
    short events = 0;
    if (why == SSL_ERROR_WANT_READ) events = POLLIN;
    if (why == SSL_ERROR_WANT_WRITE) events = POLLOUT;
    if (events == 0 || !wait_for(sock.fd, events, deadline)) return false;
  }
}

}  // namespace

PortKind probe_port(const std::string& address, double seconds, std::string* detail) {
  const Clock::time_point deadline = Clock::now() + std::chrono::duration_cast<Clock::duration>(
                                                        std::chrono::duration<double>(seconds));
  int err = 0;
  Fd sock{connect_address(address, deadline, &err)};
  if (sock.fd < 0) {
    if (err == 0) return PortKind::kUnknown;
    *detail = std::strerror(err);
    return err == ETIMEDOUT ? PortKind::kUnknown : PortKind::kNothingListening;
  }
  static constexpr char kRequest[] =
      "GET / HTTP/1.1\r\nHost: k3ctl-probe\r\nConnection: close\r\n\r\n";
  if (::send(sock.fd, kRequest, sizeof kRequest - 1, MSG_NOSIGNAL) < 0) return PortKind::kOther;
  char head[8] = {};
  size_t got = 0;
  while (got < sizeof head && wait_for(sock.fd, POLLIN, deadline)) {
    const ssize_t n = ::recv(sock.fd, head + got, sizeof head - got, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  if (got >= 5 && std::memcmp(head, "HTTP/", 5) == 0) return PortKind::kHttp1;
  // A TLS server answers plain text with an alert record: type 21, version 3.x.
  if (got >= 2 && head[0] == 0x15 && head[1] == 0x03) return PortKind::kTls;
  // Many TLS servers just close on plain text: try a handshake.
  if (tls_handshake_completes(address, deadline)) return PortKind::kTls;
  return PortKind::kOther;
}

StatusOr<v1::ListModelsResponse> check_gateway(v1::Gateway::Stub& stub,
                                               const GatewayOptions& options, double seconds) {
  grpc::ClientContext ctx;
  prepare_context(options, &ctx);
  ctx.set_deadline(std::chrono::system_clock::now() +
                   std::chrono::duration_cast<std::chrono::system_clock::duration>(
                       std::chrono::duration<double>(seconds)));
  v1::ListModelsResponse models;
  const grpc::Status status = stub.ListModels(&ctx, v1::ListModelsRequest(), &models);
  if (status.ok()) return models;
  const std::string& at = options.address;
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
      status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED)
    return absl::Status(
        static_cast<absl::StatusCode>(status.error_code()),
        cat("the gateway at ", at, " refused the first call: ", describe_error(status)));
  std::string detail;
  switch (probe_port(at, 5.0, &detail)) {
    case PortKind::kNothingListening:
      return absl::UnavailableError(cat("nothing is listening at ", at, " (", detail,
                                        "): is the gateway running, and is this its gRPC "
                                        "address (gateway --grpc-listen)?"));
    case PortKind::kHttp1:
      return absl::UnavailableError(
          cat(at,
              " is an HTTP port (the OpenAI API), not the gateway's gRPC API: use the "
              "gRPC address (gateway --grpc-listen; run-local.sh prints it as grpc=)"));
    case PortKind::kTls:
      if (options.tls_ca.empty())
        return absl::UnavailableError(
            cat(at,
                " speaks TLS: give --tls-ca with the CA that signed the gateway's "
                "certificate"));
      return absl::UnavailableError(cat("TLS with the gateway at ", at, " failed (check that ",
                                        options.tls_ca,
                                        " signed its certificate and that its "
                                        "name matches): ",
                                        describe_error(status)));
    case PortKind::kOther:
      if (!options.tls_ca.empty())
        return absl::UnavailableError(cat("the gateway at ", at, " does not answer over TLS (",
                                          describe_error(status),
                                          "): if it serves in clear, drop --tls-ca"));
      [[fallthrough]];
    case PortKind::kUnknown:
      break;
  }
  return absl::UnavailableError(
      cat("the gateway at ", at, " did not answer: ", describe_error(status)));
}

std::string explain_call_failure(v1::Gateway::Stub& stub, const GatewayOptions& options,
                                 const grpc::Status& status, double seconds) {
  if (status.error_code() != grpc::StatusCode::UNAVAILABLE &&
      status.error_code() != grpc::StatusCode::DEADLINE_EXCEEDED)
    return describe_error(status);
  StatusOr<v1::ListModelsResponse> check = check_gateway(stub, options, seconds);
  return check.ok() ? describe_error(status) : std::string(msg(check.status()));
}

}  // namespace k3::tools
