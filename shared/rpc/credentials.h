// Transport security between hosts (remote expertd and the engined that use
// it): gRPC SSL credentials from PEM files, and the shared token every call
// carries as "authorization: Bearer TOKEN", compared in constant time.
#pragma once

#include <memory>
#include <string>
#include <string_view>

#include <grpcpp/grpcpp.h>

#include "shared/status.h"

namespace k3::rpc {

// The metadata key a call's token travels under (lower case, as gRPC wants).
inline constexpr const char* kAuthMetadataKey = "authorization";

struct TlsFiles {
  std::string cert;  // PEM certificate chain of this end
  std::string key;   // PEM private key of `cert`
  std::string ca;    // PEM CA certificates the peer must be signed by
};

// A server's credentials: cert + key required; with `ca`, mutual TLS (a
// client without a certificate signed by that CA is refused in the handshake).
StatusOr<std::shared_ptr<grpc::ServerCredentials>> server_tls_credentials(const TlsFiles& f);

// A client's credentials: `ca` required (a server certificate not signed by
// it is refused); cert + key (both or neither) present a client certificate.
StatusOr<std::shared_ptr<grpc::ChannelCredentials>> client_tls_credentials(const TlsFiles& f);

// The token in `path`: its first line, surrounding whitespace removed; refuses
// an unreadable or empty file, and a file anyone but its owner can read.
StatusOr<std::string> read_token_file(const std::string& path);

// Whether `got` equals `want`, in time that depends only on their lengths.
bool token_equals(std::string_view got, std::string_view want);

// "Bearer TOKEN" for kAuthMetadataKey, and the token out of such a value
// (empty when the value is not of that form).
std::string bearer(const std::string& token);
std::string token_of_bearer(const std::string& value);

}  // namespace k3::rpc
