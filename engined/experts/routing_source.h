// An ExpertSource composed of several (the placement): each expert of a
// request goes to a local source (shared memory) that owns it if there is
// one, else to the least-loaded healthy remote host that owns it (the one
// with the fewest experts of this request so far). Every source gets its
// share at once - remote hosts first, so their work is in flight while
// local experts are computed - and completions are handed out from whichever
// source has one. When a remote host fails mid-request (UNAVAILABLE: dead,
// hung, link down), the experts it had not answered are re-issued on
// replicas within the same request; without a replica the request fails
// with the host's error. Stats are the sum of the sources'.
//
// Replicas within a step: when a demand request follows one for the same
// layer (the second of two sequence groups, half a layer behind the first),
// an expert the first sent to a remote host goes to that host again, where
// it was just read, and does not count in the load; the others balance as
// above.

#pragma once

#include <memory>
#include <vector>

#include "shared/experts/expert_source.h"

namespace k3::engined {

class RoutingSource final : public experts::ExpertSource {
 public:
  // In order of preference; at least one.
  static StatusOr<std::unique_ptr<RoutingSource>> create(
      std::vector<std::unique_ptr<experts::ExpertSource>> sources);
  Status submit(const experts::ExpertRequest& request) override;
  StatusOr<std::optional<experts::ExpertCompletion>> poll(int timeout_ms) override;
  size_t outstanding() const override;
  // OK when at least one source is usable; the sources that are not are left
  // out of routing until a later prepare() succeeds for them.
  Status prepare() override;
  bool owns(int64_t layer, int64_t expert) const override;
  experts::ExpertSourceStats stats() const override;
  // Speculative reads go to local sources only: true when every usable local
  // source's reads use this host's cores (and there is one).
  bool reads_use_host_cores() const override;
  void remote_host_stats(std::vector<experts::RemoteHostStats>* out) const override;

 private:
  explicit RoutingSource(std::vector<std::unique_ptr<experts::ExpertSource>> sources);
  // The source for the expert: a local owner, else the remote owner with the
  // least `load`; sources marked in `skip` are not considered; -1 if none.
  int route(int64_t layer, int64_t expert, const std::vector<size_t>& load,
            const std::vector<bool>& skip) const;
  // Polls source s; a completion mapped to the request's index, nullopt, or
  // (after re-issuing a failed host's work on replicas) nullopt too.
  StatusOr<std::optional<experts::ExpertCompletion>> poll_source(size_t s, int timeout_ms);
  // Source s failed with `error`: its unanswered work goes to replicas.
  Status reissue(size_t s, const Status& error);
  // Submits to source s its work in `items` (request indices).
  Status submit_to(size_t s, const std::vector<size_t>& items);
  Status no_owner(int64_t expert) const;

  std::vector<std::unique_ptr<experts::ExpertSource>> sources_;
  std::vector<Status> ready_;                  // per source: its last prepare()
  experts::ExpertRequest req_;                 // the demand request in flight
  std::vector<std::vector<size_t>> index_of_;  // per source: its work index -> request's
  std::vector<std::vector<bool>> done_;        // per source: work completed
  std::vector<bool> failed_;                   // per source: failed during this request
  // The last demand request's layer and where each of its experts went.
  int64_t last_layer_ = -1;
  std::vector<std::pair<int64_t, size_t>> last_routes_;  // (expert, source), by expert
  uint64_t reissued_ = 0;
  size_t rr_ = 0;  // where the next poll starts
};

}  // namespace k3::engined
