// libFuzzer target: the gateway's topology file (--topology FILE). Whatever
// is accepted must hold together: a non-empty address per entry, names and
// addresses distinct, a segment (when given) a valid segment reference.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string_view>

#include "gateway/core/topology_file.h"
#include "shared/shm/segment.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  auto t = k3::gateway::parse_topology(std::string_view(reinterpret_cast<const char*>(data), size),
                                       "topology.json");
  if (!t.ok()) {
    if (t.status().message().find("topology.json") == std::string_view::npos) __builtin_trap();
    return 0;
  }
  std::set<std::string> names, addresses;
  for (const auto& e : *t) {
    if (e.address.empty() || e.name.empty()) __builtin_trap();
    if (!names.insert(e.name).second || !addresses.insert(e.address).second) __builtin_trap();
    if (!e.segment.empty() && !k3::shm::valid_segment_ref(e.segment)) __builtin_trap();
  }
  return 0;
}
