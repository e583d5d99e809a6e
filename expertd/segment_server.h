// expertd's local data plane: serves the routed experts of its shards to
// engined processes on this host through a shared-memory segment
// (shared/shm/layout.h, protocol in shared/shm/server_ring.h): the clients'
// rings, their leases on slots, and the reaping of clients that died. Slots
// are kept by an LRU (shared/experts/slot_lru.h); misses are read by the
// read scheduler (read_scheduler.h) and checked (shared/experts/
// verified_read.h) before any client sees them.
//
// Two threads: the request thread drains the clients' request rings, hands
// resident slots out as leases and starts reads for misses; the completion
// thread takes finished reads in and publishes their slots. Both share one
// in-process mutex; clients never take a lock.
//
// The seam for serving other hosts: the remote listener attaches to this
// segment as one more client (shared/shm/client_ring.h) and so shares the
// slots, the reads and the pins of local clients.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "expertd/shard_set.h"
#include "shared/checkpoint/manifest.h"
#include "shared/status.h"

namespace k3::expertd {

struct SegmentServerOptions {
  // The segment's reference (shared/shm/segment.h): a /dev/shm name, or
  // DIR/NAME for expertd --segment-dir DIR.
  std::string segment = "k3serve-expertd";
  unsigned segment_mode = 0600;              // or 0660: the service group maps it too
  uint64_t cache_bytes = 4ull << 30;         // slot budget
  int queue_depth = 64;                      // io_uring reads in flight
  uint64_t read_chunk_bytes = 4u << 20;      // an expert read is split into chunks of this size
  bool direct = true;                        // O_DIRECT (buffered where the filesystem refuses)
  int64_t first_layer = 0, last_layer = -1;  // layers served (inclusive; -1 = all)
  // When set (expertd --manifest), every expert read from storage is hashed
  // (XXH3-128) and compared with its entry; must outlive the server.
  const checkpoint::Manifest* manifest = nullptr;
  // Cap on drive reads in MB/s (10^6 bytes; 0 = none): a token bucket in
  // front of io_uring submission, a benchmarking aid (expertd
  // --read-limit-mbps) to make reads the bound on fast drives.
  double read_limit_mbps = 0;
};

struct SegmentServerStats {
  uint64_t requests = 0, hits = 0, misses = 0, prefetches = 0;
  uint64_t bytes_read = 0, reads = 0, read_errors = 0;
  // Prefetches (speculative reads, shm::kRequestPrefetch): experts read
  // (counted in reads too), the ones a demand request then used (joined or
  // found resident), the ones evicted unused, and the prefetches dropped
  // (no slot at the LRU tail, or too many waiting).
  uint64_t speculative_reads = 0, speculative_used = 0, speculative_wasted = 0;
  uint64_t speculative_dropped = 0;
  uint64_t corrupt_experts = 0;  // reads refused for NaN (0xFF) MXFP4 scales, in read_errors too
  uint64_t manifest_mismatches = 0;  // reads refused by --manifest, in read_errors too
  uint64_t io_errors = 0;            // chunks that failed (errno) or came back short, per chunk
  uint64_t verified_reads = 0;       // reads checked against --manifest
  double verify_seconds = 0;         // time spent hashing them
  double read_seconds = 0;           // wall time with at least one read in flight
  double p50_ms = 0, p99_ms = 0, max_ms = 0;  // expert read latency (request to ready)
  uint32_t queue_depth = 0;                   // reads in flight now
  uint32_t clients = 0;
  uint32_t slots = 0, slots_pinned = 0;
  uint64_t reclaimed_clients = 0;
  bool direct = false;
  uint64_t read_limit_waits = 0;       // times submission paused for the read limit
  double read_limit_wait_seconds = 0;  // time it stayed paused
};

// Thread-safe.
class SegmentServer {
 public:
  // Creates the segment (refusing one a live expertd serves; replacing a stale
  // one) and starts the threads.
  static StatusOr<std::unique_ptr<SegmentServer>> start(const ShardSet& shards,
                                                        const SegmentServerOptions& opt);
  ~SegmentServer();  // stop()
  // Stops the threads, marks the segment not ready and unlinks its name.
  void stop();
  SegmentServerStats stats() const;
  const std::string& segment_name() const;
  // Whether the segment serves that expert (owned and in the layer range).
  bool serves(int64_t layer, int64_t expert) const;
  uint32_t slot_count() const;
  uint64_t slot_stride() const;

 private:
  struct Impl;
  explicit SegmentServer(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3::expertd
