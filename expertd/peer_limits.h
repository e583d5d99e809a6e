// Limits on the remote listener's Experts streams (remote_listener.h), per
// peer and in total. Every stream attaches to the segment as one client and
// the segment has kMaxClients (64) client areas: without limits one
// authenticated peer's idle streams took them all and locked the local
// engined out.
//
//   - per peer: at most max_streams_per_peer streams at once
//     (--remote-max-streams-per-peer). One engined holds one stream per host;
//     a placement swap or a reconnect holds two for a moment (the old stream
//     ends on the host a little later), an `engined score` beside it one more.
//   - in total: at most max_streams (--remote-max-streams, at most
//     kMaxClients - kLocalReserve), so the other client areas stay for local
//     attachers whatever the peers do.
//   - idle: a stream that asks nothing for idle_timeout_s
//     (--remote-idle-timeout-s; 0 = never) is cancelled and its slot freed;
//     engined reconnects on its next step.
//
// The peer is the remote IP address (peer_identity()), not the client
// certificate: `k3ctl certs` issues one client certificate that every
// compute node presents, so under mutual TLS the certificate names the
// deployment, not the host. An IPv4-mapped IPv6 address counts as its IPv4
// address.
//
// Thread-safe: gRPC's handler threads admit and release streams while the
// idle watcher (start_idle_watch) sweeps.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "shared/shm/layout.h"
#include "shared/status.h"

namespace k3::expertd {

// Client areas remote streams can never take, kept for local engined,
// `engined score`, k3ctl bench io and the like.
inline constexpr int kLocalReserve = 8;
inline constexpr int kMaxRemoteStreams = static_cast<int>(shm::kMaxClients) - kLocalReserve;

struct PeerLimitsOptions {
  int max_streams_per_peer = 4;  // --remote-max-streams-per-peer
  int max_streams = 48;          // --remote-max-streams: 16 areas left to local clients
  int idle_timeout_s = 600;      // --remote-idle-timeout-s; 0 = never
};

// INVALID_ARGUMENT naming the flag when an option is out of range:
// max_streams in [1, kMaxRemoteStreams], max_streams_per_peer in
// [1, max_streams], idle_timeout_s in [0, 86400].
Status validate(const PeerLimitsOptions& opt);

// The peer a gRPC peer string ("ipv4:10.0.0.5:41234", "ipv6:[::1]:41234")
// names: its address without the port (each connection has its own port).
// Anything else is kept whole.
std::string peer_identity(std::string_view grpc_peer);

class PeerLimits {
 public:
  using Clock = std::chrono::steady_clock;

  explicit PeerLimits(const PeerLimitsOptions& opt);
  ~PeerLimits();  // stops the idle watcher
  PeerLimits(const PeerLimits&) = delete;
  PeerLimits& operator=(const PeerLimits&) = delete;

  // An admitted stream: counted against its peer until destroyed. Move-only.
  class Admission {
   public:
    Admission() = default;
    ~Admission() { release(); }
    Admission(Admission&& o) noexcept : owner_(o.owner_), id_(o.id_) { o.owner_ = nullptr; }
    Admission& operator=(Admission&& o) noexcept;
    Admission(const Admission&) = delete;
    Admission& operator=(const Admission&) = delete;

    // A request arrived: the stream is busy (never idle) until done().
    void busy();
    // The request was answered: the idle clock starts again.
    void done();
    void release();

   private:
    friend class PeerLimits;
    Admission(PeerLimits* owner, uint64_t id) : owner_(owner), id_(id) {}
    PeerLimits* owner_ = nullptr;
    uint64_t id_ = 0;
  };

  // Admits one more stream of `peer` (peer_identity()), or
  // RESOURCE_EXHAUSTED naming the limit and its flag. `cancel` ends the
  // stream when it has been idle too long: called at most once, from the
  // idle watcher, while the Admission lives (so what it cancels is still
  // there), under this object's lock (it must not call back).
  StatusOr<Admission> admit(const std::string& peer, std::function<void()> cancel,
                            Clock::time_point now = Clock::now());

  // Cancels every stream idle since before now - idle_timeout_s; returns
  // their peers (for the log). The watcher calls it; tests call it with
  // their own `now`.
  std::vector<std::string> cancel_idle(Clock::time_point now);
  // Starts a thread that calls cancel_idle() about every second (nothing
  // when idle_timeout_s is 0); `on_cancel` hears each peer cancelled.
  void start_idle_watch(std::function<void(const std::string& peer)> on_cancel);

  int open() const;                         // streams admitted, all peers
  int open(const std::string& peer) const;  // streams admitted of `peer`
  const PeerLimitsOptions& options() const { return opt_; }

 private:
  struct Stream {
    std::string peer;
    std::function<void()> cancel;
    Clock::time_point last;  // the last request answered (or the admission)
    bool busy = false;
    bool cancelled = false;
  };
  void release(uint64_t id);
  void set_busy(uint64_t id, bool busy);

  const PeerLimitsOptions opt_;
  mutable std::mutex mu_;
  std::map<uint64_t, Stream> streams_;  // by admission id
  std::map<std::string, int> per_peer_;
  uint64_t next_id_ = 1;
  // The idle watcher.
  std::condition_variable cv_;
  bool stopping_ = false;
  std::thread watcher_;
};

}  // namespace k3::expertd
