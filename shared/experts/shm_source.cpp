#include "shared/experts/shm_source.h"

#include <algorithm>
#include <chrono>
#include <deque>
#include <thread>

#include "shared/base/hash.h"
#include "shared/base/log.h"
#include "shared/shm/client_ring.h"
#include "shared/shm/futex.h"
#include "shared/shm/layout.h"
#include "shared/shm/segment.h"

namespace k3::experts {

using shm::Header;
using Clock = std::chrono::steady_clock;

namespace {
// A completion's tag: the request's sequence number (high 16 bits) and the
// work index (low 16 bits), so completions of a replaced request are told
// apart.
constexpr uint32_t kIndexBits = 16;
constexpr uint32_t kMaxWork = shm::kRingSize / 2;
static_assert(kMaxWork <= (1u << kIndexBits));
}  // namespace

struct ShmExpertSource::Impl {
  ShmSourceOptions opt;
  ExpertShape shape;
  shm::Segment seg;
  shm::ClientRing ring;  // released before the segment is unmapped
  bool attached = false;
  ExpertSourceStats st;
  std::shared_ptr<spdlog::logger> log = base::logger("engined");

  // The demand request in flight.
  ExpertRequest req;
  uint32_t seq = 0;  // 16 bits
  size_t left = 0;
  std::deque<shm::Completion> got;  // drained from the ring, not yet handed out
  shm::ExpertLease held;            // bytes the caller holds until its next call
  std::vector<shm::Completion> drained;

  const std::string& name() const { return opt.segment; }
  std::string path() const { return shm::segment_path(opt.segment); }

  void detach() {
    held.release();
    ring.detach();
    seg = shm::Segment();
    attached = false;
  }

  Status attach() {
    detach();
    K3_ASSIGN_OR_RETURN(shm::Segment s, shm::Segment::open(name()));
    if (s.size() < sizeof(Header))
      return absl::UnavailableError(cat("segment ", path(), " is too small"));
    Header* h = shm::header_of(s.base());
    if (h->magic != shm::kMagic || h->layout_version != shm::kLayoutVersion ||
        h->header_bytes != sizeof(Header) || h->total_bytes > s.size())
      return absl::UnavailableError(cat("segment ", path(),
                                        " is not an expertd segment of layout version ",
                                        shm::kLayoutVersion, " (or is still being created)"));
    if (h->fingerprint != opt.fingerprint)
      return absl::FailedPreconditionError(
          cat("segment ", path(),
              " serves another model (fingerprint mismatch: ", base::hex64(h->fingerprint),
              ", this engine's is ", base::hex64(opt.fingerprint), "): refused"));
    if (h->expert_bytes != shape.bytes ||
        static_cast<int64_t>(h->num_experts) != shape.num_experts ||
        static_cast<int64_t>(h->num_layers) != shape.num_layers)
      return absl::FailedPreconditionError(cat("segment ", path(), " has another expert geometry"));
    if (h->ready.load(std::memory_order_acquire) != 1 ||
        !shm::process_alive(h->server_pid.load(), h->server_start_time))
      return absl::UnavailableError(cat("expertd of segment ", path(), " is not running"));
    auto r = shm::ClientRing::attach(s.base());
    if (!r.ok())
      return absl::Status(r.status().code(), cat("segment ", path(), ": ", msg(r.status())));
    seg = std::move(s);
    ring = std::move(*r);
    attached = true;
    log->info("attached to {} as client {} ({} slots)", path(), ring.client(),
              ring.header().slot_count);
    return absl::OkStatus();
  }

  // Moves what arrived into `got` (the request in flight's), counts
  // speculative-read notices and drops a replaced request's grants.
  void drain() {
    drained.clear();
    ring.drain(&drained);
    for (const shm::Completion& cp : drained) {
      if (cp.flags & shm::kCompletionSpeculativeRead) {
        ++st.speculative_reads;
        st.speculative_bytes += shape.bytes;
        continue;
      }
      const uint32_t i = cp.tag & ((1u << kIndexBits) - 1);
      if ((cp.tag >> kIndexBits) != seq || i >= req.work.size() || left == 0) {
        ring.drop_grant(cp);  // a replaced request's
        continue;
      }
      got.push_back(cp);
    }
  }

  Status gone() {
    attached = false;
    left = 0;
    got.clear();
    return absl::UnavailableError(cat("expertd of ", path(), " went away during the request"));
  }

  // Posts one request, waiting while the ring is full.
  Status post(const shm::Request& r) {
    while (!ring.post(r)) {
      ring.ring_doorbell();
      if (!ring.server_alive())
        return absl::UnavailableError(cat("expertd of ", path(), " went away"));
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
    return absl::OkStatus();
  }

  // Handles one completion of the request in flight.
  StatusOr<ExpertCompletion> take(const shm::Completion& cp) {
    const size_t i = cp.tag & ((1u << kIndexBits) - 1);
    const int64_t expert = req.work[i].expert;
    if (cp.status != 0) {
      const auto code = static_cast<absl::StatusCode>(cp.status);
      return absl::Status(
          code,
          cat("expertd of ", path(), " could not serve expert ", expert, " of layer ", req.layer,
              code == absl::StatusCode::kDataLoss
                  ? ": its read from the drive failed or its bytes were refused (expertd's "
                    "log names the shard and offset)"
                  : ""));
    }
    // The lease unpins when it goes out of scope, whatever happens below.
    auto lease = ring.lease(cp, static_cast<int32_t>(req.layer), static_cast<int32_t>(expert));
    if (!lease.ok()) return absl::DataLossError(cat(msg(lease.status()), " (", path(), ")"));
    // Bytes in a dead server's segment are not trusted.
    if (!ring.server_running()) return gone();
    if (cp.flags & shm::kCompletionRead) {
      ++st.reads;
      st.bytes_read += shape.bytes;
    } else {
      ++st.hits;
      if (cp.flags & shm::kCompletionSpeculated) ++st.speculative_hits;
    }
    bool keep = false;
    ExpertCompletion c = complete_locally(shape, req, i, lease->data(), &st, &keep);
    if (!lease->valid())
      return absl::DataLossError(cat("slot ", cp.slot, " of ", path(), " changed while in use"));
    if (keep) held = std::move(*lease);
    return c;
  }
};

ShmExpertSource::ShmExpertSource(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ShmExpertSource::~ShmExpertSource() {
  impl_->detach();
}

StatusOr<std::unique_ptr<ShmExpertSource>> ShmExpertSource::create(const ShmSourceOptions& opt,
                                                                   const ExpertShape& shape) {
  if (opt.segment.empty()) return absl::InvalidArgumentError("no expertd segment named");
  if (!shm::valid_segment_ref(opt.segment))
    return absl::InvalidArgumentError(cat("invalid expertd segment name '", opt.segment, "'"));
  auto impl = std::make_unique<Impl>();
  impl->opt = opt;
  impl->shape = shape;
  K3_RETURN_IF_ERROR(impl->attach());
  return std::unique_ptr<ShmExpertSource>(new ShmExpertSource(std::move(impl)));
}

Status ShmExpertSource::prepare() {
  Impl& m = *impl_;
  if (m.attached && m.ring.server_alive()) return absl::OkStatus();
  if (m.attached) m.log->warn("expertd of {} went away: reattaching", m.path());
  return m.attach();
}

bool ShmExpertSource::owns(int64_t layer, int64_t expert) const {
  const Impl& m = *impl_;
  return m.attached && layer >= 0 && expert >= 0 &&
         shm::serves(m.seg.base(), static_cast<uint32_t>(layer), static_cast<uint32_t>(expert));
}

ExpertSourceStats ShmExpertSource::stats() const {
  return impl_->st;
}

bool ShmExpertSource::reads_use_host_cores() const {
  const Impl& m = *impl_;
  return m.attached && (shm::header_of(m.seg.base())->read_flags & shm::kReadsBuffered) != 0;
}

size_t ShmExpertSource::outstanding() const {
  return impl_->left;
}

Status ShmExpertSource::submit(const ExpertRequest& r) {
  Impl& m = *impl_;
  m.held.release();
  K3_RETURN_IF_ERROR(check_request(r, m.shape.num_experts));
  K3_RETURN_IF_ERROR(prepare());
  if (r.work.size() > kMaxWork)
    return absl::InvalidArgumentError(cat("too many experts in one request: ", r.work.size()));
  for (const ExpertWork& w : r.work)
    if (!owns(r.layer, w.expert))
      return absl::NotFoundError(cat("no attached expertd serves expert ", w.expert, " of layer ",
                                     r.layer, " (", m.path(), " does not)"));
  if (r.priority == ExpertPriority::kSpeculative) {
    m.drain();  // notices; the demand request's completions stay in `got`
    bool posted = false;
    for (const ExpertWork& w : r.work) {
      if (!m.ring.post({static_cast<int32_t>(r.layer), static_cast<int32_t>(w.expert), 0,
                        shm::kRequestPrefetch}))
        break;  // a full ring: guesses are dropped, never waited for
      ++m.st.speculative;
      posted = true;
    }
    if (posted) m.ring.ring_doorbell();
    return absl::OkStatus();
  }
  // Completions of the replaced request still on their way are dropped (and
  // their grants unpinned) by poll() by their sequence number.
  for (const shm::Completion& cp : m.got) m.ring.drop_grant(cp);
  m.got.clear();
  m.req = r;
  m.seq = (m.seq + 1) & 0xffff;
  m.left = r.work.size();
  m.st.requests += r.work.size();
  // Post everything first: expertd reads in disk order while we compute.
  for (size_t i = 0; i < r.work.size(); ++i) {
    const uint32_t tag = (m.seq << kIndexBits) | static_cast<uint32_t>(i);
    if (Status s =
            m.post({static_cast<int32_t>(r.layer), static_cast<int32_t>(r.work[i].expert), tag, 0});
        !s.ok()) {
      m.left = 0;
      return s;
    }
  }
  if (!r.work.empty()) m.ring.ring_doorbell();
  return absl::OkStatus();
}

StatusOr<std::optional<ExpertCompletion>> ShmExpertSource::poll(int timeout_ms) {
  Impl& m = *impl_;
  m.held.release();
  if (m.left == 0) return absl::FailedPreconditionError("no expert completion is due");
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  for (;;) {
    if (!m.attached) return m.gone();
    const uint32_t seen = m.ring.completion_seq();
    m.drain();
    if (!m.got.empty()) {
      const shm::Completion cp = m.got.front();
      m.got.pop_front();
      --m.left;
      StatusOr<ExpertCompletion> c = m.take(cp);
      if (!c.ok()) {
        // The request ends; later completions are dropped by sequence.
        m.left = 0;
        m.got.clear();
        m.seq = (m.seq + 1) & 0xffff;
        return c.status();
      }
      return std::optional<ExpertCompletion>(std::move(*c));
    }
    if (timeout_ms == 0 || (timeout_ms > 0 && Clock::now() >= deadline))
      return std::optional<ExpertCompletion>();
    int wait_ms = m.opt.liveness_ms;
    if (timeout_ms > 0)
      wait_ms = std::min<int>(
          wait_ms, static_cast<int>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                        deadline - Clock::now())
                                        .count()) +
                       1);
    const auto t0 = Clock::now();
    m.ring.wait(seen, wait_ms);
    m.st.wait_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
    // expertd died or restarted: our leases there are void (the new instance
    // has a new segment); fail this request cleanly.
    if (!m.ring.server_alive()) return m.gone();
  }
}

}  // namespace k3::experts
