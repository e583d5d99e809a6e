// Running a gRPC server for a daemon: listen address parsing (unix sockets and
// TCP), start-up, and orderly shutdown on SIGINT/SIGTERM.
#pragma once

#include <sys/types.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "k3serve/v1/health.pb.h"
#include "shared/rpc/credentials.h"
#include "shared/rpc/token_gate.h"
#include "shared/status.h"

namespace k3::rpc {

// The modes of a unix socket start_server binds and of the directory
// prepare_listen_address creates for it, whatever the process umask: the
// service's user and group connect (the gateway and k3ctl run in its group).
inline constexpr mode_t kSocketMode = 0660;
inline constexpr mode_t kSocketDirMode = 0755;

// "unix:/run/k3serve/expertd.sock", "unix:///abs/path", "127.0.0.1:0", "[::1]:50051".
// For a unix address, creates the parent directory (kSocketDirMode) when
// missing and removes a stale socket file left by a dead process; refuses a
// socket that a live server still answers on.
Status prepare_listen_address(const std::string& address);

// Blocks SIGINT and SIGTERM in the calling thread (call first in main, before
// any thread starts, so every thread inherits the mask).
void block_shutdown_signals();
// Waits until SIGINT or SIGTERM arrives; returns the signal number.
int wait_for_shutdown_signal();

// A started server and the port it bound (0 for unix sockets).
struct RunningServer {
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::string address;  // as bound; a TCP port of 0 replaced by the real one
};

// How a server listens beyond its address.
struct ServerOptions {
  // TLS from PEM files (server_tls_credentials: cert + key, and with `ca`
  // mutual TLS); unset: plaintext.
  std::optional<TlsFiles> tls;
  // Largest message either way; 0 keeps gRPC's defaults. One number for
  // the whole server: a method that takes less gets its own cap with
  // cap_unary (unary_cap.h).
  int max_message_bytes = 0;
  // Set: every call passes this token check on its metadata before any of
  // its messages is read (token_gate.h), with TLS or without.
  std::shared_ptr<const TokenGate> gate;
};

// Starts `services` on `address` (prepare_listen_address first). UNAVAILABLE
// when it cannot listen: "cannot listen on ADDRESS", with TLS "cannot listen
// on ADDRESS with TLS (check --tls-cert and --tls-key)".
StatusOr<RunningServer> start_server(const std::string& address,
                                     const std::vector<grpc::Service*>& services,
                                     const ServerOptions& options = {});

// Trailing metadata a daemon's handler sets (value: the daemon's name) so its
// client can tell a status the daemon returned - an UNAVAILABLE naming a
// storage host, say - from one gRPC made up because the daemon could not be
// reached.
inline constexpr const char* kAnsweredByKey = "k3-answered-by";

// Status <-> grpc::Status (the codes are the same numbers).
grpc::Status to_grpc(const absl::Status& s);

// The daemon's serving loop: starts the server on `address`, logs where it
// listens and tells the service manager READY=1 (base/service_notify.h),
// blocks until SIGINT/SIGTERM, says STOPPING=1, shuts the server down. Returns the
// process exit code (1 when it could not listen).
int serve_until_signal(const std::string& address, const std::vector<grpc::Service*>& services,
                       const std::string& component);

// A SERVING Health answer for `component`.
void fill_health(const std::string& component, k3serve::v1::HealthResponse* out);

}  // namespace k3::rpc
