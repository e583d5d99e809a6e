#include "tools/k3ctl/step_counter.h"

#include <algorithm>
#include <utility>

namespace k3::tools {

StepCounter::StepCounter(experts::ExpertSource& inner, size_t hosts, Owns owns, bool replicas)
    : inner_(inner), hosts_(hosts), owns_(std::move(owns)), replicas_(replicas) {}

void StepCounter::count(bool on) {
  on_ = on;
  if (on) slowest_ = experts_ = 0;
  layer_ = -1;
  seen_.clear();
}

Status StepCounter::submit(const experts::ExpertRequest& r) {
  if (on_ && r.priority == experts::ExpertPriority::kDemand && hosts_ > 0) {
    if (r.layer != layer_) seen_.clear();
    layer_ = r.layer;
    std::vector<uint64_t> per_host(hosts_);
    uint64_t fresh = 0;
    for (const experts::ExpertWork& w : r.work) {
      if (!seen_.insert(w.expert).second) continue;
      ++experts_;
      ++fresh;
      for (size_t h = 0; h < hosts_; ++h)
        if (owns_(h, r.layer, w.expert)) ++per_host[h];
    }
    slowest_ += replicas_ ? (fresh + hosts_ - 1) / hosts_
                          : *std::max_element(per_host.begin(), per_host.end());
  }
  return inner_.submit(r);
}

}  // namespace k3::tools
