#include "engined/shm_expert_source.h"

#include <signal.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <thread>

#include "shared/base/log.h"
#include "shared/shm/futex.h"
#include "shared/shm/layout.h"
#include "shared/shm/segment.h"

namespace k3::engine {

using shm::ClientArea;
using shm::ClientState;
using shm::Header;
using shm::SlotEntry;
using shm::SlotState;
using Clock = std::chrono::steady_clock;

namespace {

// One attached segment and the client area this process holds in it.
struct Attachment {
  std::string name;
  shm::Segment seg;
  void* base = nullptr;
  Header* hdr = nullptr;
  ClientArea* area = nullptr;
  uint32_t client = 0;
  uint64_t epoch = 0;
  bool attached = false;

  // Cheap per-expert check: the server has not stopped and its pid exists.
  bool server_running() const {
    return attached && hdr->ready.load(std::memory_order_acquire) == 1 &&
           ::kill(hdr->server_pid.load(std::memory_order_acquire), 0) == 0;
  }

  bool server_alive() const {
    if (!attached || hdr->ready.load(std::memory_order_acquire) != 1) return false;
    return shm::process_alive(hdr->server_pid.load(std::memory_order_acquire),
                              hdr->server_start_time);
  }

  void detach() {
    if (attached && area != nullptr) {
      // Release whatever this process still pins, then free the area.
      const uint64_t bit = 1ull << client;
      SlotEntry* slots = shm::slots_of(base);
      for (uint32_t i = 0; i < hdr->slot_count; ++i) slots[i].pins.fetch_and(~bit);
      area->pid.store(0);
      area->state.store(static_cast<uint32_t>(ClientState::kFree), std::memory_order_release);
    }
    attached = false;
    area = nullptr;
    seg = shm::Segment();
    base = nullptr;
    hdr = nullptr;
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
    ClientArea* areas = shm::clients_of(seg.base());
    const int pid = ::getpid();
    const uint64_t start = shm::process_start_time(pid);
    for (uint32_t c = 0; c < shm::kMaxClients; ++c) {
      uint32_t expected = static_cast<uint32_t>(ClientState::kFree);
      if (!areas[c].state.compare_exchange_strong(expected,
                                                  static_cast<uint32_t>(ClientState::kClaimed)))
        continue;
      ClientArea& ca = areas[c];
      ca.start_time.store(start);
      ca.pid.store(pid, std::memory_order_release);
      // Start the rings where expertd's cursors are.
      ca.req_head.store(ca.req_tail.load(std::memory_order_acquire), std::memory_order_release);
      ca.comp_tail.store(ca.comp_head.load(std::memory_order_acquire), std::memory_order_release);
      ca.state.store(static_cast<uint32_t>(ClientState::kActive), std::memory_order_release);
      a.seg = std::move(seg);
      a.base = a.seg.base();
      a.hdr = shm::header_of(a.base);
      a.area = &ca;
      a.client = c;
      a.epoch = a.hdr->epoch;
      a.attached = true;
      log->info("attached to /dev/shm/{} as client {} ({} slots)", a.name, c, a.hdr->slot_count);
      return absl::OkStatus();
    }
    return absl::ResourceExhaustedError(cat(
        "segment /dev/shm/", a.name, " has no free client area (", shm::kMaxClients, " in use)"));
  }

  // Attaches (or reattaches after an expertd restart) every segment.
  Status ensure_attached() {
    for (Attachment& a : att) {
      if (a.attached && a.server_alive() && a.hdr->epoch == a.epoch) continue;
      if (a.attached) log->warn("expertd of /dev/shm/{} went away: reattaching", a.name);
      K3_RETURN_IF_ERROR(attach(a));
    }
    return absl::OkStatus();
  }

  int route(int64_t layer, int64_t expert) const {
    for (size_t s = 0; s < att.size(); ++s)
      if (shm::serves(att[s].base, static_cast<uint32_t>(layer), static_cast<uint32_t>(expert)))
        return static_cast<int>(s);
    return -1;
  }

  void post(Attachment& a, int64_t layer, int64_t expert, uint32_t tag, uint32_t flags) {
    ClientArea& ca = *a.area;
    const uint64_t head = ca.req_head.load(std::memory_order_relaxed);
    ca.req[head % shm::kRingSize] = {static_cast<int32_t>(layer), static_cast<int32_t>(expert), tag,
                                     flags};
    ca.req_head.store(head + 1, std::memory_order_release);
  }

  void ring_doorbell(Attachment& a) {
    a.hdr->doorbell.fetch_add(1, std::memory_order_release);
    shm::futex_wake_all(&a.hdr->doorbell);
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
  for (const auto& name : opt.segments) impl->att.push_back(Attachment{name});
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
    ClientArea& ca = *m.att[s].area;
    if (ca.req_head.load() - ca.req_tail.load(std::memory_order_acquire) >= shm::kRingSize) break;
    m.post(m.att[s], layer, e, 0, shm::kRequestPrefetch);
    rang[s] = true;
  }
  for (size_t s = 0; s < m.att.size(); ++s)
    if (rang[s]) m.ring_doorbell(m.att[s]);
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
    while (a.area->req_head.load() - a.area->req_tail.load(std::memory_order_acquire) >=
           shm::kRingSize) {
      m.ring_doorbell(a);
      if (!a.server_alive())
        return absl::UnavailableError(cat("expertd of /dev/shm/", a.name, " went away"));
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    m.post(a, layer, ids[i], static_cast<uint32_t>(i), 0);
    ++outstanding[seg_of[i]];
  }
  for (size_t s = 0; s < m.att.size(); ++s)
    if (outstanding[s]) m.ring_doorbell(m.att[s]);

  Status result;
  size_t left = ids.size();
  size_t rr = 0;
  while (left > 0) {
    // Wait on one segment with work outstanding (round robin when several).
    size_t s = rr++ % m.att.size();
    while (outstanding[s] == 0) s = rr++ % m.att.size();
    Attachment& a = m.att[s];
    ClientArea& ca = *a.area;
    const uint32_t seen = ca.comp_futex.load(std::memory_order_acquire);
    uint64_t tail = ca.comp_tail.load(std::memory_order_relaxed);
    uint64_t head = ca.comp_head.load(std::memory_order_acquire);
    if (tail == head) {
      const auto t0 = Clock::now();
      const int n_busy = static_cast<int>(
          std::count_if(outstanding.begin(), outstanding.end(), [](size_t x) { return x > 0; }));
      shm::futex_wait(&ca.comp_futex, seen, n_busy > 1 ? 1 : m.opt.liveness_ms);
      m.st.wait_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
      if (ca.comp_tail.load() == ca.comp_head.load(std::memory_order_acquire) &&
          (!a.server_alive() || a.hdr->epoch != a.epoch)) {
        // expertd died or restarted: our leases there are void (the new
        // instance has a new segment); fail this request cleanly.
        a.attached = false;
        return absl::UnavailableError(
            cat("expertd of /dev/shm/", a.name, " went away during the request"));
      }
      continue;
    }
    SlotEntry* slots = shm::slots_of(a.base);
    for (; tail < head; ++tail) {
      const shm::Completion cp = ca.comp[tail % shm::kRingSize];
      ca.comp_tail.store(tail + 1, std::memory_order_release);
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
      if (cp.slot >= a.hdr->slot_count) {
        if (result.ok()) result = absl::InternalError("expertd sent a slot out of range");
        continue;
      }
      SlotEntry& se = slots[cp.slot];
      const uint64_t bit = 1ull << a.client;
      auto intact = [&] {
        return se.state.load(std::memory_order_acquire) ==
                   static_cast<uint32_t>(SlotState::kReady) &&
               se.generation.load(std::memory_order_acquire) == cp.generation &&
               se.layer.load() == layer && se.expert.load() == ids[cp.tag] &&
               (se.pins.load(std::memory_order_acquire) & bit) && a.hdr->epoch == a.epoch;
      };
      if (result.ok() && !a.server_running()) {
        // Bytes in a dead server's segment are not trusted: fail the request.
        result = absl::UnavailableError(
            cat("expertd of /dev/shm/", a.name, " went away during the request"));
        a.attached = false;
      }
      if (result.ok()) {
        if (!intact()) {
          result = absl::DataLossError(cat("slot ", cp.slot, " of /dev/shm/", a.name,
                                           " does not hold expert ", ids[cp.tag], " of layer ",
                                           layer, " as leased"));
        } else {
          const uint8_t* data = static_cast<const uint8_t*>(a.base) + se.data_offset.load();
          result = on_ready(cp.tag, data);
          if (result.ok() && !intact())
            result = absl::DataLossError(cat("slot ", cp.slot, " changed while in use"));
        }
      }
      se.pins.fetch_and(~bit, std::memory_order_acq_rel);  // release the lease
    }
  }
  return result;
}

}  // namespace k3::engine
