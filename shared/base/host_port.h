// TCP addresses as every flag, config file and client names them:
// "HOST:PORT", an IPv6 host in brackets ("[::1]:50051"). The one parser of
// them, so a storage host, a listen address and a gateway address are read
// alike everywhere.
//
// Thread-safe (pure).
#pragma once

#include <string>
#include <string_view>

#include "shared/status.h"

namespace k3::base {

struct HostPort {
  std::string host;  // without the brackets of an IPv6 address
  int port = 0;
};

// Parses "HOST:PORT" with a port in [min_port, 65535] (1 where 0 would mean
// "any port" and nothing to a client). INVALID_ARGUMENT naming the address:
// "'A' is not HOST:PORT" or "'A': port must be MIN..65535".
StatusOr<HostPort> parse_host_port(std::string_view address, int min_port = 0);

// `address` ("HOST:PORT") with its port replaced by `port` (a port of 0 by
// the one a server bound).
std::string with_port(std::string_view address, int port);

}  // namespace k3::base
