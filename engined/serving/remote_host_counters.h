// The remote hosts' counters across placements: a placement (SetPlacement)
// replaces the expert source, and with it the sources made for each remote
// host; a host the new placement keeps keeps its counts, the retired
// sources' counters added to those of the new one.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "shared/experts/expert_source.h"

namespace k3::engined {

// Not thread-safe: the engine loop's thread owns it.
class RemoteHostCounters {
 public:
  // Keeps the counters of `source`'s remote hosts (null: none) before the
  // source is replaced.
  void retire(const experts::ExpertSource* source);
  // Per remote host of `source` (null: none): its last state, its counters
  // added to those of the sources retired for the same host, its latency
  // histogram kRemoteLatencyBuckets long.
  std::vector<experts::RemoteHostStats> current(const experts::ExpertSource* source) const;

 private:
  // The retired sources' counters, by "NAME HOST:PORT".
  std::map<std::string, experts::RemoteHostStats> retired_;
};

}  // namespace k3::engined
