// The public gRPC server: k3serve.v1.Gateway on --grpc-listen, over TLS
// (grpc::SslServerCredentials) when --tls-cert/--tls-key are given.
#pragma once

#include <string>
#include <vector>

#include "gateway/core/config.h"
#include "shared/rpc/server.h"

namespace k3::gateway {

StatusOr<rpc::RunningServer> start_grpc_server(const GatewayConfig& config,
                                               const std::vector<grpc::Service*>& services);

}  // namespace k3::gateway
