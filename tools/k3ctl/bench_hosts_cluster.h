// The storage hosts of `k3ctl bench hosts`, in this process: each is
// expertd's own data plane over a shard directory and its remote listener on
// loopback (expertd::SegmentServer + RemoteListener, as `expertd --remote-listen
// 127.0.0.1:0 --insecure-remote --read-limit-mbps N` runs them), and the
// engine's source over them (RemoteExpertSource through the placement,
// exactly as engined --remote-expertd builds it).
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engined/model/model.h"
#include "expertd/control_service.h"
#include "expertd/remote_listener.h"
#include "expertd/shard_set.h"
#include "shared/experts/expert_source.h"
#include "shared/status.h"
#include "tools/k3ctl/bench_decode_run.h"

namespace k3::tools {

// One storage host. Members stop in reverse order.
struct BenchHost {
  std::string name;
  std::unique_ptr<expertd::ShardSet> shards;
  BenchServer data;
  std::unique_ptr<expertd::ControlService> control;
  std::unique_ptr<expertd::RemoteListener> remote;
};

// A host serving the shards of `dir` with `slots` expert slots (O_DIRECT,
// `queue_depth` reads in flight), its drive reads capped at read_limit_mbps
// (0: no cap).
StatusOr<std::unique_ptr<BenchHost>> start_bench_host(const std::string& name,
                                                      const std::string& dir, uint64_t slots,
                                                      double read_limit_mbps, int queue_depth);

// The engine's source over `hosts` (engined --remote-expertd NAME=ADDR ...),
// prepared.
StatusOr<std::unique_ptr<experts::ExpertSource>> bench_hosts_source(
    const std::vector<std::unique_ptr<BenchHost>>& hosts, const engined::Model& m);

// What a host has counted so far (take two and subtract for an interval).
struct BenchHostCounts {
  uint64_t requests = 0, hits = 0, bytes_read = 0, stream_bytes = 0;
  bool direct = false;
};
BenchHostCounts bench_host_counts(const BenchHost& h);

}  // namespace k3::tools
