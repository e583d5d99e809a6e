// expertd's remote listener (--remote-listen HOST:PORT): RemoteExpertService
// (proto/k3serve/v1/expert.proto) for engined processes on other hosts.
//
// Each Experts stream attaches to this expertd's own shared-memory segment
// as one more client (shared/experts/shm_source.h), so remote work shares
// the io_uring reads, the slot LRU and the pins of local clients, and
// computes rows with the same kernels engined uses
// (shared/experts/expert_compute.h): rows are bit-identical wherever they
// are computed. A request names its kernel variant; this host refuses any
// other than its own. Calls are authenticated by the shared token (constant
// time compare) over TLS, or plaintext with --insecure-remote only. Streams
// are limited per peer and in total, and closed when idle (peer_limits.h),
// so peers never take the client slots local engined attaches with.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "expertd/peer_limits.h"
#include "expertd/shard_set.h"
#include "shared/rpc/credentials.h"
#include "shared/status.h"

namespace k3::expertd {

class SegmentServer;
class ControlService;

struct RemoteListenerOptions {
  std::string listen;  // HOST:PORT ("" = no remote listener)
  rpc::TlsFiles tls;   // cert + key; with ca: mutual TLS
  std::string token;   // the shared token ("" only with insecure)
  bool insecure = false;
  PeerLimitsOptions limits;  // streams per peer, in total, idle (peer_limits.h)
};

struct RemoteListenerStats {
  uint64_t streams = 0, requests = 0, replies = 0;
  uint64_t bytes_in = 0, bytes_out = 0;
  uint64_t rows = 0, bytes_experts = 0, refused = 0;
};

class RemoteListener {
 public:
  // Listens on opt.listen; `control` answers Describe/Stats/Health for it.
  static StatusOr<std::unique_ptr<RemoteListener>> start(const ShardSet& shards,
                                                         const SegmentServer& data,
                                                         ControlService& control,
                                                         const RemoteListenerOptions& opt);
  ~RemoteListener();  // stop()
  // Cancels the streams and stops listening.
  void stop();
  // As bound (a port of 0 replaced by the real one).
  const std::string& address() const;
  bool insecure() const;
  RemoteListenerStats stats() const;

 private:
  struct Impl;
  explicit RemoteListener(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3::expertd
