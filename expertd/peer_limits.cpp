#include "expertd/peer_limits.h"

namespace k3::expertd {

Status validate(const PeerLimitsOptions& opt) {
  if (opt.max_streams < 1 || opt.max_streams > kMaxRemoteStreams)
    return absl::InvalidArgumentError(
        cat("--remote-max-streams ", opt.max_streams, " is outside [1, ", kMaxRemoteStreams,
            "] (the segment has ", shm::kMaxClients, " client slots; ", kLocalReserve,
            " stay for local clients)"));
  if (opt.max_streams_per_peer < 1 || opt.max_streams_per_peer > opt.max_streams)
    return absl::InvalidArgumentError(cat("--remote-max-streams-per-peer ",
                                          opt.max_streams_per_peer, " is outside [1, ",
                                          opt.max_streams, "] (--remote-max-streams)"));
  if (opt.idle_timeout_s < 0 || opt.idle_timeout_s > 86400)
    return absl::InvalidArgumentError(
        cat("--remote-idle-timeout-s ", opt.idle_timeout_s, " is outside [0, 86400] (0 = never)"));
  return absl::OkStatus();
}

std::string peer_identity(std::string_view p) {
  auto starts = [](std::string_view s, std::string_view prefix) {
    return s.substr(0, prefix.size()) == prefix;
  };
  if (starts(p, "ipv4:")) {
    p.remove_prefix(5);
    const size_t colon = p.rfind(':');
    return std::string(colon == std::string_view::npos ? p : p.substr(0, colon));
  }
  if (starts(p, "ipv6:")) {
    // "ipv6:[::1]:41234", or URI-escaped "ipv6:%5B::1%5D:41234" (newer gRPC).
    std::string_view a = p.substr(5);
    std::string_view open = "[", close = "]";
    if (starts(a, "%5B") || starts(a, "%5b")) open = a.substr(0, 3), close = "%5D";
    if (!starts(a, open)) return std::string(p);
    a.remove_prefix(open.size());
    size_t end = a.find(close);
    if (end == std::string_view::npos && close == "%5D") end = a.find("%5d");
    if (end == std::string_view::npos) return std::string(p);
    a = a.substr(0, end);
    // The IPv4-mapped form of an IPv4 peer (a dual-stack listener) is that
    // IPv4 peer.
    if ((starts(a, "::ffff:") || starts(a, "::FFFF:")) && a.find('.') != std::string_view::npos)
      a.remove_prefix(7);
    return std::string(a);
  }
  return std::string(p);
}

PeerLimits::Admission& PeerLimits::Admission::operator=(Admission&& o) noexcept {
  if (this == &o) return *this;
  release();
  owner_ = o.owner_;
  id_ = o.id_;
  o.owner_ = nullptr;
  return *this;
}

void PeerLimits::Admission::busy() {
  if (owner_) owner_->set_busy(id_, true);
}

void PeerLimits::Admission::done() {
  if (owner_) owner_->set_busy(id_, false);
}

void PeerLimits::Admission::release() {
  if (owner_) owner_->release(id_);
  owner_ = nullptr;
}

PeerLimits::PeerLimits(const PeerLimitsOptions& opt) : opt_(opt) {}

PeerLimits::~PeerLimits() {
  {
    std::lock_guard<std::mutex> lk(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
}

StatusOr<PeerLimits::Admission> PeerLimits::admit(const std::string& peer,
                                                  std::function<void()> cancel,
                                                  Clock::time_point now) {
  std::lock_guard<std::mutex> lk(mu_);
  int& mine = per_peer_[peer];
  if (mine >= opt_.max_streams_per_peer)
    return absl::ResourceExhaustedError(
        cat("expertd refused the stream: peer ", peer, " already has ", mine,
            " remote streams open, the most --remote-max-streams-per-peer ",
            opt_.max_streams_per_peer, " allows"));
  if (static_cast<int>(streams_.size()) >= opt_.max_streams) {
    if (mine == 0) per_peer_.erase(peer);
    return absl::ResourceExhaustedError(
        cat("expertd refused the stream of peer ", peer, ": ", streams_.size(),
            " remote streams are open, the most --remote-max-streams ", opt_.max_streams,
            " allows (the segment's other client slots are kept for local clients)"));
  }
  ++mine;
  const uint64_t id = next_id_++;
  streams_[id] = Stream{peer, std::move(cancel), now, false, false};
  return Admission(this, id);
}

void PeerLimits::release(uint64_t id) {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  auto p = per_peer_.find(it->second.peer);
  if (p != per_peer_.end() && --p->second <= 0) per_peer_.erase(p);
  streams_.erase(it);
}

void PeerLimits::set_busy(uint64_t id, bool busy) {
  const Clock::time_point now = Clock::now();
  std::lock_guard<std::mutex> lk(mu_);
  auto it = streams_.find(id);
  if (it == streams_.end()) return;
  it->second.busy = busy;
  it->second.last = now;
}

std::vector<std::string> PeerLimits::cancel_idle(Clock::time_point now) {
  std::vector<std::string> peers;
  if (opt_.idle_timeout_s == 0) return peers;
  const auto timeout = std::chrono::seconds(opt_.idle_timeout_s);
  std::lock_guard<std::mutex> lk(mu_);
  for (auto& [id, s] : streams_) {
    if (s.busy || s.cancelled || now - s.last < timeout) continue;
    s.cancelled = true;
    if (s.cancel) s.cancel();
    peers.push_back(s.peer);
  }
  return peers;
}

void PeerLimits::start_idle_watch(std::function<void(const std::string& peer)> on_cancel) {
  if (opt_.idle_timeout_s == 0 || watcher_.joinable()) return;
  watcher_ = std::thread([this, on_cancel = std::move(on_cancel)] {
    std::unique_lock<std::mutex> lk(mu_);
    while (!cv_.wait_for(lk, std::chrono::seconds(1), [&] { return stopping_; })) {
      lk.unlock();
      for (const std::string& peer : cancel_idle(Clock::now()))
        if (on_cancel) on_cancel(peer);
      lk.lock();
    }
  });
}

int PeerLimits::open() const {
  std::lock_guard<std::mutex> lk(mu_);
  return static_cast<int>(streams_.size());
}

int PeerLimits::open(const std::string& peer) const {
  std::lock_guard<std::mutex> lk(mu_);
  auto it = per_peer_.find(peer);
  return it == per_peer_.end() ? 0 : it->second;
}

}  // namespace k3::expertd
