// Where the engine gets routed experts from, asynchronously (issue 10,
// "Interface"). A request names one MoE layer's experts and, per expert,
// either "deliver its bytes" or "compute these token rows with it"; it goes
// out at once (submit), and the caller takes completions as they arrive
// (poll), computing on what arrived while the rest is in flight. Speculative
// requests (prefetch) go behind demand ones and never complete.
//
// Local sources (pread_source.h, shm_source.h) compute rows by delivering
// bytes to themselves and running the same kernels (expert_compute.h), so a
// source computing next to the data elsewhere slots in behind the same
// interface. routing_source.h composes several.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "shared/experts/expert_compute.h"
#include "shared/status.h"

namespace k3::experts {

struct ExpertSourceStats {
  uint64_t requests = 0;           // experts asked for on demand
  uint64_t hits = 0;               // ... found resident
  uint64_t reads = 0;              // ... read from storage for the request
  uint64_t bytes_read = 0;         // bytes of those reads (reads x expert bytes)
  uint64_t speculative = 0;        // experts asked for speculatively (their reads are not above)
  uint64_t speculative_reads = 0;  // ... of them read from storage (bytes below)
  uint64_t speculative_bytes = 0;
  // Demand requests served by a speculative read (resident or in flight),
  // the first use of each: the reads speculation hid. Counted in hits.
  uint64_t speculative_hits = 0;
  double wait_seconds = 0;     // time poll() spent waiting for bytes (unhidden I/O)
  double compute_seconds = 0;  // time spent computing rows for "compute" work
  // Reads refused (the in-process reader; an expertd counts its own):
  uint64_t corrupt_experts = 0;      // NaN (0xFF) MXFP4 scales
  uint64_t manifest_mismatches = 0;  // XXH3-128 differs from --manifest's
  uint64_t verified_reads = 0;       // reads checked against --manifest
  double verify_seconds = 0;         // time hashing them (loader threads)
  // Remote hosts (remote_source.h): bytes on the link both ways (serialized
  // messages plus gRPC's 5-byte prefix), stream messages sent, and layer work
  // re-issued on a replica after a host failed.
  uint64_t network_bytes = 0;
  uint64_t remote_messages = 0;
  uint64_t reissued = 0;

  // Field by field: the sum of several sources' (a placement), and what
  // accrued between two readings of one source (b taken before a).
  ExpertSourceStats& operator+=(const ExpertSourceStats& o);
  friend ExpertSourceStats operator-(const ExpertSourceStats& a, const ExpertSourceStats& b);
};

// One remote host's own figures (remote_source.h), for engined's Stats and
// the gateway's /metrics.
struct RemoteHostStats {
  std::string name, address;
  bool up = false;        // connected, answering Describe with this model
  std::string error;      // why not, when down
  uint64_t requests = 0;  // experts asked of it on demand
  uint64_t steps = 0;     // demand layer steps sent (one stream message each)
  uint64_t bytes_sent = 0, bytes_received = 0;
  uint64_t failures = 0;  // steps it failed (dead, hung, link down, refused)
  // Round trip of each demand step (request sent to last reply), in
  // kRemoteLatencyBounds buckets (not cumulative; one more for +Inf).
  std::vector<uint64_t> latency_buckets;
  double latency_sum = 0;
  uint64_t latency_count = 0;
  // Adds `o`'s counters (not its name, state or error) to these.
  void add_counters(const RemoteHostStats& o);
};
// Upper bounds, seconds: from a loopback round trip to a hung host's deadline.
inline constexpr double kRemoteLatencyBounds[] = {0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                                  0.1,    0.25,  0.5,    1,     2.5,  5,     10};
inline constexpr size_t kRemoteLatencyBuckets =
    sizeof(kRemoteLatencyBounds) / sizeof(kRemoteLatencyBounds[0]) + 1;

enum class ExpertPriority {
  kDemand,       // the layer step waits for it
  kSpeculative,  // read ahead if idle; never delays demand work, never completes
};

// One expert of a request.
struct ExpertWork {
  int64_t expert = 0;
  bool compute = false;       // false: deliver the bytes; true: compute `rows`
  std::vector<int64_t> rows;  // token rows of the request's activations (compute)
};

struct ExpertRequest {
  int64_t layer = 0;
  std::vector<ExpertWork> work;  // distinct experts
  ExpertPriority priority = ExpertPriority::kDemand;
  // Needed when any work computes; must stay valid until the request's last
  // completion was polled.
  const ExpertActivations* activations = nullptr;
};

// One finished ExpertWork.
struct ExpertCompletion {
  size_t index = 0;  // into ExpertRequest::work
  // Deliver: the expert's bytes (ExpertIndex::layout()), valid until the next
  // call on the source.
  const uint8_t* bytes = nullptr;
  // Compute: unweighted output rows {rows.size(), latent}, in work.rows order.
  std::vector<float> rows;
};

// Not thread-safe: one caller at a time, one demand request in flight.
class ExpertSource {
 public:
  virtual ~ExpertSource() = default;
  // Posts a request and returns at once. A demand request replaces the one
  // in flight (whose remaining completions are dropped). A speculative one
  // asks for bytes only (its work must not compute).
  virtual Status submit(const ExpertRequest& request) = 0;
  // The next completion of the demand request in flight, waiting at most
  // timeout_ms (< 0: until one arrives); nullopt on timeout. An error ends
  // the request.
  virtual StatusOr<std::optional<ExpertCompletion>> poll(int timeout_ms) = 0;
  // Completions of the demand request not yet polled.
  virtual size_t outstanding() const = 0;
  // Makes the source usable before routing (attaching to an expertd that
  // started or restarted); UNAVAILABLE while it cannot be.
  virtual Status prepare() { return absl::OkStatus(); }
  // Whether this source serves that expert (after prepare()).
  virtual bool owns(int64_t layer, int64_t expert) const = 0;
  virtual ExpertSourceStats stats() const = 0;
  // Whether the experts come from another host (the placement prefers local
  // sources, and balances over remote replicas).
  virtual bool remote() const { return false; }
  // Whether its reads are copies made by this host's cores (buffered reads,
  // through the page cache): a read posted early then takes the cores the
  // compute needs, so speculation has nothing to hide (model/speculator.h).
  virtual bool reads_use_host_cores() const { return false; }
  // Appends the figures of each remote host this source is or contains.
  virtual void remote_host_stats(std::vector<RemoteHostStats>* out) const { (void)out; }

  // poll(-1): the next completion (FAILED_PRECONDITION when none is due).
  StatusOr<ExpertCompletion> next();
};

// A synchronous use of the interface (tools and tests): asks for the bytes
// of experts `ids` of `layer` and calls on_ready(i, bytes) for each as it
// arrives, the bytes valid during the call. Stops at the first error (the
// source's or on_ready's).
Status fetch_bytes(ExpertSource& src, int64_t layer, const std::vector<int64_t>& ids,
                   const std::function<Status(size_t i, const uint8_t* bytes)>& on_ready);

// For local sources: the completion of work `index` of `r` from the expert's
// bytes: the bytes themselves, or the rows computed on them here (the time
// goes to stats->compute_seconds). `*bytes_used` says whether the caller must
// keep the bytes until the next call.
ExpertCompletion complete_locally(const ExpertShape& shape, const ExpertRequest& r, size_t index,
                                  const uint8_t* bytes, ExpertSourceStats* stats, bool* bytes_used);

// Checks a request against the source's geometry before anything is posted:
// distinct experts in [0, num_experts), rows inside the activations, compute
// work with activations, no compute in a speculative request.
Status check_request(const ExpertRequest& r, int64_t num_experts);

}  // namespace k3::experts
