#include "engined/shm_expert_source.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "shared/base/log.h"
#include "shared/shm/client_ring.h"
#include "shared/shm/futex.h"
#include "shared/shm/layout.h"
#include "shared/shm/segment.h"

namespace k3::engine {

using shm::Header;
using Clock = std::chrono::steady_clock;

namespace {

// One attached segment and the client area this process holds in it.
struct Attachment {
  std::string name;
  shm::Segment seg;
  shm::ClientRing ring;  // released before the segment is unmapped
  bool attached = false;

  void detach() {
    ring.detach();
    seg = shm::Segment();
    attached = false;
  }
};

}  // namespace

struct ShmExpertSource::Impl {
  ShmSourceOptions opt;
  std::vector<Attachment> att;
  ExpertSourceStats st;
  std::shared_ptr<spdlog::logger> log = logger("engined");

  Status attach(Attachment& a) {
    a.detach();
    K3_ASSIGN_OR_RETURN(shm::Segment seg, shm::Segment::open(a.name));
    if (seg.size() < sizeof(Header))
      return absl::UnavailableError(cat("segment /dev/shm/", a.name, " is too small"));
    Header* h = shm::header_of(seg.base());
    if (h->magic != shm::kMagic || h->layout_version != shm::kLayoutVersion ||
        h->header_bytes != sizeof(Header) || h->total_bytes > seg.size())
      return absl::UnavailableError(cat("segment /dev/shm/", a.name,
                                        " is not an expertd segment of layout version ",
                                        shm::kLayoutVersion, " (or is still being created)"));
    if (h->fingerprint != opt.fingerprint)
      return absl::FailedPreconditionError(
          cat("segment /dev/shm/", a.name, " serves another model (fingerprint mismatch)"));
    if (h->expert_bytes != opt.expert_bytes || h->num_experts != opt.num_experts)
      return absl::FailedPreconditionError(
          cat("segment /dev/shm/", a.name, " has another expert geometry"));
    if (h->ready.load(std::memory_order_acquire) != 1 ||
        !shm::process_alive(h->server_pid.load(), h->server_start_time))
      return absl::UnavailableError(cat("expertd of segment /dev/shm/", a.name, " is not running"));
    auto ring = shm::ClientRing::attach(seg.base());
    if (!ring.ok())
      return absl::Status(ring.status().code(),
                          cat("segment /dev/shm/", a.name, ": ", msg(ring.status())));
    a.seg = std::move(seg);
    a.ring = std::move(*ring);
    a.attached = true;
    log->info("attached to /dev/shm/{} as client {} ({} slots)", a.name, a.ring.client(),
              a.ring.header().slot_count);
    return absl::OkStatus();
  }

  // Attaches (or reattaches after an expertd restart) every segment.
  Status ensure_attached() {
    for (Attachment& a : att) {
      if (a.attached && a.ring.server_alive()) continue;
      if (a.attached) log->warn("expertd of /dev/shm/{} went away: reattaching", a.name);
      K3_RETURN_IF_ERROR(attach(a));
    }
    return absl::OkStatus();
  }

  int route(int64_t layer, int64_t expert) const {
    for (size_t s = 0; s < att.size(); ++s)
      if (shm::serves(att[s].seg.base(), static_cast<uint32_t>(layer),
                      static_cast<uint32_t>(expert)))
        return static_cast<int>(s);
    return -1;
  }

  static shm::Request request(int64_t layer, int64_t expert, uint32_t tag, uint32_t flags) {
    return {static_cast<int32_t>(layer), static_cast<int32_t>(expert), tag, flags};
  }
};

ShmExpertSource::ShmExpertSource(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ShmExpertSource::~ShmExpertSource() {
  for (auto& a : impl_->att) a.detach();
}

StatusOr<std::unique_ptr<ShmExpertSource>> ShmExpertSource::create(const ShmSourceOptions& opt) {
  if (opt.segments.empty()) return absl::InvalidArgumentError("no expertd segment named");
  auto impl = std::make_unique<Impl>();
  impl->opt = opt;
  for (const auto& name : opt.segments) {
    impl->att.emplace_back();
    impl->att.back().name = name;
  }
  K3_RETURN_IF_ERROR(impl->ensure_attached());
  return std::unique_ptr<ShmExpertSource>(new ShmExpertSource(std::move(impl)));
}

ExpertSourceStats ShmExpertSource::stats() const {
  return impl_->st;
}

Status ShmExpertSource::prefetch(int64_t layer, const std::vector<int64_t>& ids) {
  Impl& m = *impl_;
  K3_RETURN_IF_ERROR(m.ensure_attached());
  std::vector<bool> rang(m.att.size(), false);
  for (int64_t e : ids) {
    const int s = m.route(layer, e);
    if (s < 0) continue;
    if (!m.att[s].ring.post(Impl::request(layer, e, 0, shm::kRequestPrefetch))) break;
    rang[s] = true;
  }
  for (size_t s = 0; s < m.att.size(); ++s)
    if (rang[s]) m.att[s].ring.ring_doorbell();
  return absl::OkStatus();
}

Status ShmExpertSource::fetch(int64_t layer, const std::vector<int64_t>& ids,
                              const ExpertReadyFn& on_ready) {
  Impl& m = *impl_;
  K3_RETURN_IF_ERROR(m.ensure_attached());
  if (ids.size() > shm::kRingSize / 2)
    return absl::InvalidArgumentError(cat("too many experts in one request: ", ids.size()));
  m.st.requests += ids.size();
  // Post everything first: expertd reads in disk order while we compute.
  std::vector<int> seg_of(ids.size());
  std::vector<size_t> outstanding(m.att.size(), 0);
  for (size_t i = 0; i < ids.size(); ++i) {
    seg_of[i] = m.route(layer, ids[i]);
    if (seg_of[i] < 0)
      return absl::NotFoundError(
          cat("no attached expertd serves expert ", ids[i], " of layer ", layer));
  }
  for (size_t i = 0; i < ids.size(); ++i) {
    Attachment& a = m.att[seg_of[i]];
    // Leave room: a ring never holds more than one fetch's requests plus prefetches.
    while (!a.ring.post(Impl::request(layer, ids[i], static_cast<uint32_t>(i), 0))) {
      a.ring.ring_doorbell();
      if (!a.ring.server_alive())
        return absl::UnavailableError(cat("expertd of /dev/shm/", a.name, " went away"));
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    ++outstanding[seg_of[i]];
  }
  for (size_t s = 0; s < m.att.size(); ++s)
    if (outstanding[s]) m.att[s].ring.ring_doorbell();

  Status result;
  std::vector<shm::Completion> done;
  size_t left = ids.size();
  size_t rr = 0;
  while (left > 0) {
    // Wait on one segment with work outstanding (round robin when several).
    size_t s = rr++ % m.att.size();
    while (outstanding[s] == 0) s = rr++ % m.att.size();
    Attachment& a = m.att[s];
    const uint32_t seen = a.ring.completion_seq();
    done.clear();
    if (a.ring.drain(&done) == 0) {
      const auto t0 = Clock::now();
      const int n_busy = static_cast<int>(
          std::count_if(outstanding.begin(), outstanding.end(), [](size_t x) { return x > 0; }));
      a.ring.wait(seen, n_busy > 1 ? 1 : m.opt.liveness_ms);
      m.st.wait_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      if (!a.ring.server_alive()) {
        // expertd died or restarted: our leases there are void (the new
        // instance has a new segment); fail this request cleanly.
        a.attached = false;
        return absl::UnavailableError(
            cat("expertd of /dev/shm/", a.name, " went away during the request"));
      }
      continue;
    }
    for (const shm::Completion& cp : done) {
      --outstanding[s];
      --left;
      if (cp.tag >= ids.size()) continue;  // stale completion of an earlier, failed request
      if (cp.status != 0) {
        if (result.ok())
          result = absl::Status(static_cast<absl::StatusCode>(cp.status),
                                cat("expertd of /dev/shm/", a.name, " could not serve expert ",
                                    ids[cp.tag], " of layer ", layer));
        continue;
      }
      // The lease unpins when it goes out of scope, whatever happens below.
      auto lease = a.ring.lease(cp, static_cast<int32_t>(layer), static_cast<int32_t>(ids[cp.tag]));
      if (!result.ok()) continue;
      if (!lease.ok()) {
        result = absl::DataLossError(cat(msg(lease.status()), " (/dev/shm/", a.name, ")"));
        continue;
      }
      if (!a.ring.server_running()) {
        // Bytes in a dead server's segment are not trusted: fail the request.
        result = absl::UnavailableError(
            cat("expertd of /dev/shm/", a.name, " went away during the request"));
        a.attached = false;
        continue;
      }
      if (cp.flags & shm::kCompletionRead) {
        ++m.st.reads;
        m.st.bytes_read += m.opt.expert_bytes;
      } else {
        ++m.st.hits;
      }
      result = on_ready(cp.tag, lease->data());
      if (result.ok() && !lease->valid())
        result = absl::DataLossError(
            cat("slot ", cp.slot, " of /dev/shm/", a.name, " changed while in use"));
    }
  }
  return result;
}

}  // namespace k3::engine
