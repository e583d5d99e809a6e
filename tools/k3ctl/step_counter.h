// An ExpertSource decorator for `k3ctl bench hosts`: the engine's source as
// it is, counting for each demand layer step how many of its experts each
// host owns. The step waits for the host with the most (its reads, when the
// caches miss), so the sum over steps of that maximum is the decode's
// layer-synchronous I/O. With two sequence groups a layer's second request
// (right after the first, same layer) counts only the experts the first did
// not ask for (those are read once, still cached), so experts() is the
// union over the batch, once per step. Not thread-safe (as any
// ExpertSource).
#pragma once

#include <cstdint>
#include <functional>
#include <set>
#include <vector>

#include "shared/experts/expert_source.h"

namespace k3::tools {

class StepCounter final : public k3::experts::ExpertSource {
 public:
  // owns(h, layer, expert): whether host h serves that expert. `replicas`:
  // every host owns every expert and the placement splits a request's new
  // experts evenly, so the busiest host gets ceil(new / hosts).
  using Owns = std::function<bool(size_t host, int64_t layer, int64_t expert)>;
  StepCounter(k3::experts::ExpertSource& inner, size_t hosts, Owns owns, bool replicas);
  // Counts the demand steps submitted while on (on: from zero).
  void count(bool on);
  uint64_t slowest() const { return slowest_; }  // sum over steps of the largest host's experts
  uint64_t experts() const { return experts_; }  // experts of those steps

  Status submit(const k3::experts::ExpertRequest& r) override;
  StatusOr<std::optional<k3::experts::ExpertCompletion>> poll(int timeout_ms) override {
    return inner_.poll(timeout_ms);
  }
  size_t outstanding() const override { return inner_.outstanding(); }
  Status prepare() override { return inner_.prepare(); }
  bool owns(int64_t layer, int64_t expert) const override { return inner_.owns(layer, expert); }
  k3::experts::ExpertSourceStats stats() const override { return inner_.stats(); }
  bool remote() const override { return inner_.remote(); }
  bool reads_use_host_cores() const override { return inner_.reads_use_host_cores(); }
  void remote_host_stats(std::vector<k3::experts::RemoteHostStats>* out) const override {
    inner_.remote_host_stats(out);
  }

 private:
  k3::experts::ExpertSource& inner_;
  const size_t hosts_;
  const Owns owns_;
  const bool replicas_;
  bool on_ = false;
  uint64_t slowest_ = 0, experts_ = 0;
  int64_t layer_ = -1;      // of the last demand request
  std::set<int64_t> seen_;  // experts asked for at layer_ in this step
};

}  // namespace k3::tools
