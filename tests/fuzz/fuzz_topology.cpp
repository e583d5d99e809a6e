// libFuzzer target: the gateway's topology file (--topology FILE). Whatever
// is accepted must hold together: a non-empty address per entry, names and
// addresses distinct, a segment (when given) a valid segment reference; a
// remote host with HOST:PORT, absolute paths, TLS + token or insecure alone.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>

#include "gateway/core/topology_file.h"
#include "shared/shm/segment.h"

namespace {

bool absolute_or_empty(const std::string& p) {
  return p.empty() || p.front() == '/';
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = k3::gateway::parse_topology(std::string_view(reinterpret_cast<const char*>(data), size),
                                       "topology.json");
  if (!t.ok()) {
    if (t.status().message().find("topology.json") == std::string_view::npos) __builtin_trap();
    return 0;
  }
  std::set<std::string> names, addresses;
  for (const auto& e : t->expertd) {
    if (e.address.empty() || e.name.empty()) __builtin_trap();
    if (!names.insert(e.name).second || !addresses.insert(e.address).second) __builtin_trap();
    if (!e.segment.empty() && !k3::shm::valid_segment_ref(e.segment)) __builtin_trap();
  }
  std::set<std::string> remote_addresses;
  for (const auto& r : t->remote_expertd) {
    if (r.name.empty() || r.name.find('=') != std::string::npos) __builtin_trap();
    if (!names.insert(r.name).second || !remote_addresses.insert(r.address).second)
      __builtin_trap();
    const size_t colon = r.address.rfind(':');
    if (colon == std::string::npos || colon == 0 || colon + 1 == r.address.size()) __builtin_trap();
    const int port = std::stoi(r.address.substr(colon + 1));
    if (port < 1 || port > 65535) __builtin_trap();
    for (const std::string* p : {&r.tls_ca, &r.tls_cert, &r.tls_key, &r.auth_token_file})
      if (!absolute_or_empty(*p)) __builtin_trap();
    const bool tls = !r.tls_ca.empty() || !r.tls_cert.empty() || !r.tls_key.empty();
    if (r.insecure ? tls : (r.tls_ca.empty() || r.auth_token_file.empty())) __builtin_trap();
    if (r.tls_cert.empty() != r.tls_key.empty()) __builtin_trap();
  }
  return 0;
}
