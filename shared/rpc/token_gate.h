// A server's token check done on a call's metadata before any of its
// messages is read: gRPC's auth metadata processor, registered on the
// server's credentials, refuses a call without the right token
// (UNAUTHENTICATED) while only its headers have arrived. A handler's own
// check would come too late: for a unary method gRPC reads the whole request
// message (up to the server's receive cap) before the handler runs, so an
// unauthenticated peer could make the server buffer that much per call.
//
// With TLS the processor is set on the TLS credentials (ServerCredentials::
// SetAuthMetadataProcessor). gRPC's C++ InsecureServerCredentials refuse a
// processor, but gRPC's core runs one on insecure credentials just the same:
// InsecureCredentialsWithProcessor passes it to them, so a plaintext server
// (expertd --insecure-remote) checks the token as early as a TLS one. What
// plaintext does not give - the token travels in clear, a peer on the path
// can read and replay it - is said in docs/deploy.md.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "shared/rpc/credentials.h"
#include "shared/status.h"

namespace k3::rpc {

// The token check of a server.
struct TokenGate {
  // Whether a call whose kAuthMetadataKey value is `authorization` may go on
  // (the value whole, e.g. "Bearer TOKEN"; a call without one is refused
  // without asking).
  std::function<bool(std::string_view authorization)> accepts;
  // Full method names ("/k3serve.v1.GatewayService/Health") open without a
  // token.
  std::vector<std::string> open_methods;
  // The UNAUTHENTICATED messages: no token at all, a token not accepted.
  std::string missing_message = "no auth token";
  std::string wrong_message = "a wrong auth token";
  // Told of each refusal (a log line, a counter); may be empty. `method` is
  // the call's full method name (empty when gRPC did not pass it).
  std::function<void(std::string_view method, bool had_token)> on_refused;

  // OK, or UNAUTHENTICATED with one of the messages above.
  grpc::Status check(std::string_view method, std::optional<std::string_view> authorization) const;
};

// A gate accepting exactly "Bearer TOKEN" for `token` (constant-time
// compare, token_equals).
TokenGate bearer_token_gate(std::string token);

// The gate as gRPC's processor (non-blocking: the check is a compare, run
// on the thread that read the headers).
std::shared_ptr<grpc::AuthMetadataProcessor> token_gate_processor(
    std::shared_ptr<const TokenGate> gate);

// Plaintext server credentials that run an auth metadata processor (gRPC's
// own InsecureServerCredentials abort on SetAuthMetadataProcessor). The
// processor runs inline on gRPC's thread (it must not block; IsBlocking is
// not looked at) and is given no AuthContext (nullptr: a plaintext peer has
// no identity).
class InsecureCredentialsWithProcessor final : public grpc::ServerCredentials {
 public:
  void SetAuthMetadataProcessor(
      const std::shared_ptr<grpc::AuthMetadataProcessor>& processor) override;

 private:
  int AddPortToServer(const std::string& addr, grpc_server* server) override;
  std::shared_ptr<grpc::AuthMetadataProcessor> processor_;
};

// A server's credentials: TLS (server_tls_credentials) when `tls` is set,
// else plaintext; with `gate`, every call passes it before a message is
// read.
StatusOr<std::shared_ptr<grpc::ServerCredentials>> gated_server_credentials(
    const std::optional<TlsFiles>& tls, std::shared_ptr<const TokenGate> gate);

}  // namespace k3::rpc
