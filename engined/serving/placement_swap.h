// Placement swapping: a placement is the set of expert sources the gateway
// sends by SetPlacement (expertd segments and remote hosts). It arrives on a
// gRPC thread and is swapped in by the engine loop's thread between steps:
// PlacementSwap hands it over and keeps the one in use, and
// swap_expert_source remakes the loop's expert source from it.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "engined/experts/source_factory.h"
#include "engined/model/model.h"
#include "engined/serving/remote_host_counters.h"

namespace k3::engined {

// What a SetPlacement names. It replaces the whole set: segments and remote
// hosts alike (the flag-given ones until the first).
struct Placement {
  std::vector<std::string> segments;
  std::vector<RemoteHost> remote_hosts;
};

// Thread-safe: request() and the accessors from any thread; posted(),
// applied() and close() from the loop thread.
class PlacementSwap {
 public:
  // `initial`: the flag-given sources, in use until the first placement.
  explicit PlacementSwap(Placement initial);

  // Checks each host (check_remote_host, names distinct) before anything
  // changes; then, unless `p` is the placement in use, posts it, calls
  // `wake` (which wakes the loop thread) and waits until the loop thread
  // has applied it (or is gone). The sources decide, not the version: a
  // restarted gateway counts from 1 again. The version counts once applied.
  Status request(Placement p, uint64_t version, const std::function<void()>& wake);

  // Loop thread, between steps: the placement posted and not yet applied.
  std::optional<Placement> posted() const;
  bool pending() const;
  // Loop thread: `p` is in use from now (applied with `status`); the waiting
  // requests return `status`.
  void applied(Placement p, Status status);
  // Loop thread, on its way out: waiting requests return.
  void close();

  uint64_t version() const { return version_.load(); }
  // The segments and remote hosts in use (as last set).
  std::vector<std::string> segments() const;
  std::vector<RemoteHost> remote_hosts() const;

 private:
  void raise_version(uint64_t version);

  mutable std::mutex mu_;  // guards everything below but version_
  std::condition_variable cv_;
  bool pending_ = false;
  bool closed_ = false;
  Placement posted_;
  Placement in_use_;
  Status status_;  // the last applied placement's
  std::atomic<uint64_t> version_{0};
};

// Loop thread: replaces `*experts` with a source made for `p` (`*options`
// then names p's sources), after keeping the retired source's remote host
// counters in `hosts`, and logs the placement. UNAVAILABLE when a segment or
// host cannot be attached yet (the next step retries).
Status swap_expert_source(const Placement& p, const Model& model, ExpertSourceOptions* options,
                          std::unique_ptr<k3::experts::ExpertSource>* experts,
                          RemoteHostCounters* hosts);

}  // namespace k3::engined
