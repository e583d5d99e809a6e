#include "shared/base/host_port.h"

namespace k3::base {

StatusOr<HostPort> parse_host_port(std::string_view a, int min_port) {
  const size_t colon = a.rfind(':');
  if (colon == std::string_view::npos || colon == 0 || colon + 1 == a.size())
    return absl::InvalidArgumentError(cat("'", a, "' is not HOST:PORT"));
  HostPort hp;
  hp.host = std::string(a.substr(0, colon));
  if (hp.host.size() > 2 && hp.host.front() == '[' && hp.host.back() == ']')
    hp.host = hp.host.substr(1, hp.host.size() - 2);
  const std::string_view port = a.substr(colon + 1);
  int p = 0;
  bool digits = port.size() <= 5;
  for (char c : port) {
    if (c < '0' || c > '9') digits = false;
    if (digits) p = p * 10 + (c - '0');
  }
  if (!digits || p < min_port || p > 65535)
    return absl::InvalidArgumentError(cat("'", a, "': port must be ", min_port, "..65535"));
  hp.port = p;
  return hp;
}

std::string with_port(std::string_view address, int port) {
  return cat(address.substr(0, address.rfind(':')), ":", port);
}

}  // namespace k3::base
