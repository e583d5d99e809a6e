#include "gateway/grpc/grpc_server.h"

#include "shared/base/file.h"

namespace k3::gateway {

StatusOr<rpc::RunningServer> start_grpc_server(const GatewayConfig& config,
                                               const std::vector<grpc::Service*>& services) {
  if (config.tls_cert.empty()) return rpc::start_server(config.grpc_listen, services);
  const std::string& address = config.grpc_listen;
  K3_RETURN_IF_ERROR(rpc::prepare_listen_address(address));
  grpc::SslServerCredentialsOptions ssl;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  K3_ASSIGN_OR_RETURN(pair.private_key, read_small_file(config.tls_key));
  K3_ASSIGN_OR_RETURN(pair.cert_chain, read_small_file(config.tls_cert));
  ssl.pem_key_cert_pairs.push_back(std::move(pair));
  grpc::ServerBuilder builder;
  rpc::RunningServer r;
  builder.AddListeningPort(address, grpc::SslServerCredentials(ssl), &r.port);
  for (grpc::Service* s : services) builder.RegisterService(s);
  r.server = builder.BuildAndStart();
  if (!r.server || (address.rfind("unix:", 0) != 0 && r.port == 0))
    return absl::UnavailableError(
        cat("cannot listen on ", address, " with TLS (check --tls-cert and --tls-key)"));
  r.address = address;
  if (address.rfind("unix:", 0) != 0)
    r.address = cat(address.substr(0, address.rfind(':')), ":", r.port);
  return r;
}

}  // namespace k3::gateway
