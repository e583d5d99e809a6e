#include "shared/rpc/credentials.h"

#include <sys/stat.h>

#include <utility>

#include "shared/base/file.h"

namespace k3::rpc {
namespace {

StatusOr<std::string> read_pem(const std::string& path, const char* flag) {
  StatusOr<std::string> text = base::read_small_file(path, 1u << 20);
  if (!text.ok())
    return absl::Status(text.status().code(), cat(flag, " ", text.status().message()));
  std::string s = std::move(*text);
  if (s.find("-----BEGIN ") == std::string::npos)
    return absl::InvalidArgumentError(cat(flag, " ", path, ": not a PEM file"));
  return s;
}

}  // namespace

StatusOr<std::shared_ptr<grpc::ServerCredentials>> server_tls_credentials(const TlsFiles& f) {
  if (f.cert.empty() || f.key.empty())
    return absl::InvalidArgumentError("TLS needs both --tls-cert and --tls-key");
  grpc::SslServerCredentialsOptions o(
      f.ca.empty() ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                   : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  K3_ASSIGN_OR_RETURN(pair.cert_chain, read_pem(f.cert, "--tls-cert"));
  K3_ASSIGN_OR_RETURN(pair.private_key, read_pem(f.key, "--tls-key"));
  o.pem_key_cert_pairs.push_back(pair);
  if (!f.ca.empty()) {
    K3_ASSIGN_OR_RETURN(o.pem_root_certs, read_pem(f.ca, "--tls-ca"));
  }
  return grpc::SslServerCredentials(o);
}

StatusOr<std::shared_ptr<grpc::ChannelCredentials>> client_tls_credentials(const TlsFiles& f) {
  if (f.ca.empty()) return absl::InvalidArgumentError("TLS to a remote expertd needs --tls-ca");
  if (f.cert.empty() != f.key.empty())
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  grpc::SslCredentialsOptions o;
  K3_ASSIGN_OR_RETURN(o.pem_root_certs, read_pem(f.ca, "--tls-ca"));
  if (!f.cert.empty()) {
    K3_ASSIGN_OR_RETURN(o.pem_cert_chain, read_pem(f.cert, "--tls-cert"));
    K3_ASSIGN_OR_RETURN(o.pem_private_key, read_pem(f.key, "--tls-key"));
  }
  return grpc::SslCredentials(o);
}

StatusOr<std::string> read_token_file(const std::string& path) {
  StatusOr<std::string> text = base::read_secret_file(path, S_IRWXG | S_IRWXO);
  if (!text.ok())
    return absl::Status(text.status().code(), cat("--auth-token-file ", text.status().message()));
  const std::string line = text->substr(0, text->find('\n'));
  const auto b = line.find_first_not_of(" \t\r\n");
  const auto e = line.find_last_not_of(" \t\r\n");
  if (b == std::string::npos)
    return absl::InvalidArgumentError(cat("--auth-token-file ", path, ": empty"));
  return line.substr(b, e - b + 1);
}

bool token_equals(std::string_view got, std::string_view want) {
  // Every byte of the longer string is looked at whatever the contents.
  const size_t n = std::max(got.size(), want.size());
  unsigned char diff = got.size() == want.size() ? 0 : 1;
  for (size_t i = 0; i < n; ++i) {
    const unsigned char a = i < got.size() ? static_cast<unsigned char>(got[i]) : 0;
    const unsigned char b = i < want.size() ? static_cast<unsigned char>(want[i]) : 0;
    diff |= static_cast<unsigned char>(a ^ b);
  }
  return diff == 0;
}

std::string bearer(const std::string& token) {
  return "Bearer " + token;
}

std::string token_of_bearer(const std::string& value) {
  constexpr std::string_view kPrefix = "Bearer ";
  if (value.size() <= kPrefix.size() || value.compare(0, kPrefix.size(), kPrefix) != 0) return {};
  return value.substr(kPrefix.size());
}

}  // namespace k3::rpc
