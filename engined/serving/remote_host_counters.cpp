#include "engined/serving/remote_host_counters.h"

#include "shared/base/status.h"

namespace k3::engine {
namespace {

std::string host_key(const RemoteHostStats& h) {
  return cat(h.name, " ", h.address);
}

}  // namespace

void RemoteHostCounters::retire(const ExpertSource* source) {
  if (!source) return;
  std::vector<RemoteHostStats> old;
  source->remote_host_stats(&old);
  for (const RemoteHostStats& h : old) retired_[host_key(h)].add_counters(h);
}

std::vector<RemoteHostStats> RemoteHostCounters::current(const ExpertSource* source) const {
  std::vector<RemoteHostStats> now;
  if (source) source->remote_host_stats(&now);
  for (RemoteHostStats& h : now) {
    h.latency_buckets.resize(kRemoteLatencyBuckets, 0);
    auto it = retired_.find(host_key(h));
    if (it != retired_.end()) h.add_counters(it->second);
  }
  return now;
}

}  // namespace k3::engine
