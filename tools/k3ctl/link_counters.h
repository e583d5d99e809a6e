// The bytes a network interface counts, for benchmarks that report the bytes
// on the link: a private network namespace whose loopback carries only this
// process's traffic, and the interface's rx/tx byte counters.
//
// In a private namespace the loopback sees nothing but the benchmark's own
// connections, so its counters are exact even on a shared machine (the host
// namespace's lo also carries every other process's local traffic).
#pragma once

#include <cstdint>
#include <string>

#include "shared/status.h"

namespace k3::tools {

struct LinkCounters {
  uint64_t rx_bytes = 0, tx_bytes = 0;
};

// Moves this process into a new network namespace and brings its loopback
// up. Must run while the process has one thread (a namespace is per thread;
// threads made later inherit it): FAILED_PRECONDITION otherwise, or the
// errno's message when the kernel refuses (no CAP_SYS_ADMIN).
Status enter_private_network_namespace();

// The counters of interface `name` in this process's network namespace
// (/proc/self/net/dev; sysfs would show the namespace it was mounted in).
StatusOr<LinkCounters> read_link_counters(const std::string& name);

}  // namespace k3::tools
