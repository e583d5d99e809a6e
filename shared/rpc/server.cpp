#include "shared/rpc/server.h"

#include <signal.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "shared/base/host_port.h"
#include "shared/base/log.h"
#include "shared/base/service_notify.h"
#include "shared/base/version.h"

namespace k3::rpc {
namespace {

constexpr std::string_view kUnix = "unix:";

std::string unix_path(const std::string& address) {
  std::string p = address.substr(kUnix.size());
  if (p.rfind("//", 0) == 0) p = p.substr(2);
  return p;
}

// True when something accepts connections on the unix socket at `path`.
bool unix_socket_alive(const std::string& path) {
  int fd = ::socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  sockaddr_un sa{};
  sa.sun_family = AF_UNIX;
  std::strncpy(sa.sun_path, path.c_str(), sizeof(sa.sun_path) - 1);
  bool alive = ::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
  ::close(fd);
  return alive;
}

}  // namespace

Status prepare_listen_address(const std::string& address) {
  if (address.rfind(kUnix, 0) != 0) return absl::OkStatus();
  const std::string path = unix_path(address);
  if (path.empty() || path.size() >= sizeof(sockaddr_un::sun_path))
    return absl::InvalidArgumentError(cat("unix socket path '", path, "' is empty or too long"));
  std::error_code ec;
  const auto parent = std::filesystem::path(path).parent_path();
  if (!parent.empty() && !std::filesystem::exists(parent, ec)) {
    std::filesystem::create_directories(parent, ec);
    // Its mode is ours, not the umask's (under umask 000 it would be 0777).
    if (!ec)
      std::filesystem::permissions(parent, std::filesystem::perms(kSocketDirMode),
                                   std::filesystem::perm_options::replace, ec);
    if (ec)
      return absl::PermissionDeniedError(
          cat("cannot create socket directory ", parent.string(), ": ", ec.message()));
  }
  struct stat st;
  if (::lstat(path.c_str(), &st) == 0) {
    if (!S_ISSOCK(st.st_mode))
      return absl::AlreadyExistsError(cat(path, " exists and is not a socket"));
    if (unix_socket_alive(path))
      return absl::AlreadyExistsError(
          cat(path, ": another server is already listening on this socket"));
    ::unlink(path.c_str());  // stale socket of a dead process
  }
  return absl::OkStatus();
}

void block_shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
}

int wait_for_shutdown_signal() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  int sig = 0;
  while (sigwait(&set, &sig) != 0) {
  }
  return sig;
}

StatusOr<RunningServer> start_server(const std::string& address,
                                     const std::vector<grpc::Service*>& services,
                                     const ServerOptions& options) {
  K3_RETURN_IF_ERROR(prepare_listen_address(address));
  K3_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                      gated_server_credentials(options.tls, options.gate));
  grpc::ServerBuilder builder;
  RunningServer r;
  builder.AddListeningPort(address, credentials, &r.port);
  for (grpc::Service* s : services) builder.RegisterService(s);
  if (options.max_message_bytes > 0) {
    builder.SetMaxReceiveMessageSize(options.max_message_bytes);
    builder.SetMaxSendMessageSize(options.max_message_bytes);
  }
  const bool unix_socket = address.rfind(kUnix, 0) == 0;
  // A unix socket's mode is the umask's when it is bound: bind it under a
  // umask that leaves at most kSocketMode (the service's user and group; under
  // umask 000 any local user would reach SetPlacement and Generate), then set
  // kSocketMode itself. gRPC binds in BuildAndStart, on this thread.
  const mode_t old_umask = unix_socket ? ::umask(0777 & ~kSocketMode) : 0;
  r.server = builder.BuildAndStart();
  if (unix_socket) {
    ::umask(old_umask);
    if (r.server && ::chmod(unix_path(address).c_str(), kSocketMode) != 0)
      return absl::PermissionDeniedError(
          cat("cannot set the mode of socket ", unix_path(address), ": ", std::strerror(errno)));
  }
  if (!r.server || (!unix_socket && r.port == 0))
    return absl::UnavailableError(
        options.tls.has_value()
            ? cat("cannot listen on ", address, " with TLS (check --tls-cert and --tls-key)")
            : cat("cannot listen on ", address));
  r.address = address;
  if (!unix_socket) r.address = base::with_port(address, r.port);
  return r;
}

int serve_until_signal(const std::string& address, const std::vector<grpc::Service*>& services,
                       const std::string& component) {
  auto log = base::logger(component);
  auto server = start_server(address, services);
  if (!server.ok()) {
    log->error("{}", server.status().message());
    return 1;
  }
  log->info("listening on {}", server->address);
  // Type=notify: the unit is started once the API answers.
  if (auto s = base::notify_ready(cat("serving on ", server->address)); !s.ok())
    log->warn("{}", msg(s));
  const int sig = wait_for_shutdown_signal();
  log->info("signal {}: shutting down", sig);
  (void)base::notify_stopping();
  // Calls still running (a long generation) are cancelled after a grace
  // period instead of holding the shutdown up.
  server->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(3));
  return 0;
}

void fill_health(const std::string& component, k3serve::v1::HealthResponse* out) {
  out->set_status(k3serve::v1::HealthResponse::SERVING);
  out->set_component(component);
  out->set_version(base::version());
  out->set_commit(base::git_commit());
}

grpc::Status to_grpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

}  // namespace k3::rpc
