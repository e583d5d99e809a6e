// The deployment's expert topology: which expertd instances exist (a JSON
// file), what each serves (asked with Describe), whether each is healthy
// (polled), and the placement engined is told to use: the healthy instances'
// segments, in file order, so each expert comes from the first healthy
// instance that serves it, then the file's remote hosts (all of them:
// engined connects to them itself, polls their health and routes each expert
// to a healthy owner). When an instance fails, its replicas (instances
// serving the same layers) take over with the next placement.
//
// The placement replaces engined's whole set, its --expertd and
// --remote-expertd flags included: with a topology file the file decides.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gateway/core/engine_client.h"
#include "gateway/core/topology_file.h"
#include "k3serve/v1/expert.grpc.pb.h"
#include "shared/status.h"

namespace k3::gateway {

// A daemon's build as its Health (expertd) or Describe (engined) says.
struct BuildInfo {
  std::string version;
  std::string commit;
};

struct ExpertdState {
  ExpertdEntry entry;
  bool healthy = false;
  bool polled = false;  // false until the first poll has asked it
  BuildInfo build;      // as of its last answer
  std::string segment;
  std::vector<uint32_t> layers;  // layers it serves (some experts of)
  std::string error;             // why it is not healthy
  k3serve::v1::StatsResponse stats;
};

// Thread-safe. A poller thread runs while the object lives.
class Topology {
 public:
  Topology(TopologyFile file, EngineClient* engine, double poll_seconds,
           std::function<void(const k3serve::v1::EngineDescribeResponse&)> on_engine);
  ~Topology();

  std::vector<ExpertdState> snapshot() const;
  bool engine_up() const { return engine_up_.load(); }
  std::string engine_error() const;
  // engined's counters as of the last poll (none while it is down): /metrics
  // reads these instead of asking engined on every scrape.
  std::optional<k3serve::v1::EngineStatsResponse> engine_stats() const;
  // engined's build, as of the last time it answered (none before).
  std::optional<BuildInfo> engine_build() const;
  // The file's remote hosts, in order.
  const std::vector<RemoteExpertdEntry>& remote_hosts() const { return remote_; }
  // The segments of the last placement engined acknowledged.
  std::vector<std::string> placement() const;
  uint64_t placement_version() const { return version_.load(); }

 private:
  void run();
  void poll();

  std::vector<ExpertdEntry> entries_;
  std::vector<RemoteExpertdEntry> remote_;
  std::vector<std::unique_ptr<k3serve::v1::ExpertService::Stub>> stubs_;  // per entry
  EngineClient* engine_;
  double poll_seconds_;
  std::function<void(const k3serve::v1::EngineDescribeResponse&)> on_engine_;

  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  bool poke_ = false;
  std::vector<ExpertdState> states_;
  std::vector<std::string> placement_;
  std::string engine_error_;
  std::optional<k3serve::v1::EngineStatsResponse> engine_stats_;
  std::optional<BuildInfo> engine_build_;
  std::atomic<bool> engine_up_{false};
  std::atomic<uint64_t> version_{0};
  std::mutex poll_mu_;  // one poll at a time
  std::thread thread_;
};

}  // namespace k3::gateway
