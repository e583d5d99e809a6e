#include "engined/serving/remote_host_counters.h"

#include "shared/status.h"

namespace k3::engined {
namespace {

std::string host_key(const experts::RemoteHostStats& h) {
  return cat(h.name, " ", h.address);
}

}  // namespace

void RemoteHostCounters::retire(const experts::ExpertSource* source) {
  if (!source) return;
  std::vector<experts::RemoteHostStats> old;
  source->remote_host_stats(&old);
  for (const experts::RemoteHostStats& h : old) retired_[host_key(h)].add_counters(h);
}

std::vector<experts::RemoteHostStats> RemoteHostCounters::current(
    const experts::ExpertSource* source) const {
  std::vector<experts::RemoteHostStats> now;
  if (source) source->remote_host_stats(&now);
  for (experts::RemoteHostStats& h : now) {
    h.latency_buckets.resize(experts::kRemoteLatencyBuckets, 0);
    auto it = retired_.find(host_key(h));
    if (it != retired_.end()) h.add_counters(it->second);
  }
  return now;
}

}  // namespace k3::engined
