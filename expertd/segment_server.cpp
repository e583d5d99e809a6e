#include "expertd/segment_server.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "expertd/read_scheduler.h"
#include "expertd/uring_reader.h"
#include "shared/base/log.h"
#include "shared/experts/slot_lru.h"
#include "shared/experts/verified_read.h"
#include "shared/shm/futex.h"
#include "shared/shm/layout.h"
#include "shared/shm/segment.h"
#include "shared/shm/server_ring.h"

namespace k3::expertd {

using k3::checkpoint::ExpertLocation;
using k3::checkpoint::ModelConfig;

using shm::Header;
using shm::SlotEntry;
using shm::SlotState;
using Clock = std::chrono::steady_clock;

namespace {

struct Waiter {
  uint32_t client;
  uint32_t tag;
  bool reader;      // this request caused the read (its completion says so)
  bool speculated;  // it joined a speculative read (which hid part of the read)
};

// The clients of one read in flight.
struct ReadClients {
  std::vector<Waiter> waiters;
  uint32_t spec_client = 0;  // a prefetch's client (told when the bytes are in)
};

// Prefetches waiting for a speculative place, at most (older ones dropped).
constexpr size_t kSpecQueue = 256;

}  // namespace

struct SegmentServer::Impl {
  const ShardSet* shards = nullptr;
  SegmentServerOptions opt;
  shm::Segment seg;
  void* base = nullptr;
  Header* hdr = nullptr;
  shm::ServerRing rings;
  SlotEntry* slots = nullptr;
  uint32_t nslots = 0;
  uint64_t stride = 0;
  std::shared_ptr<spdlog::logger> log = base::logger("expertd");

  std::unique_ptr<UringReader> reader;
  bool direct = false;

  // State below is guarded by mu.
  mutable std::mutex mu;
  std::unique_ptr<experts::SlotLru> cache;  // READY slots
  std::unique_ptr<ReadScheduler> scheduler;
  std::unordered_map<uint64_t, ReadClients> clients;  // read id -> its clients
  // Prefetches waiting for one of the kSpeculativeInFlight places (client,
  // request), oldest first.
  std::deque<std::pair<uint32_t, shm::Request>> spec_queue;
  std::vector<uint8_t> spec_unused;  // per slot: read speculatively, no demand served yet
  std::deque<std::pair<uint32_t, shm::Request>> blocked;  // misses waiting for a free slot
  SegmentServerStats st;
  std::vector<double> latencies_ms;  // recent read latencies (ring)
  size_t latency_next = 0;

  std::atomic<bool> running{false};
  std::thread request_thread, completion_thread;
  std::atomic<uint64_t> reclaimed{0};

  // A completion to a client (under mu); woken by rings.wake_pending().
  void complete(uint32_t c, uint32_t tag, uint32_t slot, int32_t status, uint32_t flags = 0) {
    if (!rings.publish(c, tag, slot, status, flags))
      log->warn("client {} is gone or its completion ring is full; dropping a completion", c);
  }

  bool cached_or_reading(int32_t layer, int32_t expert) const {
    return cache->contains(layer, expert) || scheduler->reading(layer, expert).has_value();
  }

  // Handles one request (under mu). Returns false when it must wait for a slot.
  bool handle(uint32_t c, const shm::Request& r) {
    const bool prefetch = r.flags & shm::kRequestPrefetch;
    ++st.requests;
    if (prefetch) ++st.prefetches;
    if (r.layer < 0 || r.expert < 0 ||
        !shm::serves(base, static_cast<uint32_t>(r.layer), static_cast<uint32_t>(r.expert))) {
      if (!prefetch)
        complete(c, r.tag, UINT32_MAX, static_cast<int32_t>(absl::StatusCode::kNotFound));
      return true;
    }
    if (prefetch) {
      // A guess waits for a speculative place (start_speculative()); the
      // oldest guesses go first when too many wait.
      if (cached_or_reading(r.layer, r.expert)) return true;
      spec_queue.push_back({c, r});
      while (spec_queue.size() > kSpecQueue) {
        spec_queue.pop_front();
        ++st.speculative_dropped;
      }
      return true;
    }
    if (auto slot = cache->find(r.layer, r.expert)) {
      ++st.hits;
      uint32_t flags = 0;
      if (spec_unused[*slot]) {
        spec_unused[*slot] = 0;
        ++st.speculative_used;
        flags = shm::kCompletionSpeculated;
      }
      complete(c, r.tag, *slot, 0, flags);
      return true;
    }
    if (const std::optional<uint64_t> id = scheduler->reading(r.layer, r.expert)) {
      ++st.hits;  // joins a read in flight
      const bool speculated = scheduler->read(*id).speculative;
      if (speculated) {
        // From now on a demand read: its chunks left go ahead of every guess.
        scheduler->promote(*id);
        ++st.speculative_used;
      }
      clients[*id].waiters.push_back({c, r.tag, false, speculated});
      return true;
    }
    const std::optional<uint32_t> taken = cache->take();
    if (!taken) return false;
    const uint64_t id = start_read(*taken, r.layer, r.expert, false, c);
    ++st.misses;
    clients[id].waiters.push_back({c, r.tag, true, false});
    return true;
  }

  // Starts waiting prefetches while fewer than kSpeculativeInFlight
  // speculative reads run (under mu). A guess takes an empty slot or the
  // LRU tail, never more; without one it is dropped.
  void start_speculative() {
    while (scheduler->speculative_active() < shm::kSpeculativeInFlight && !spec_queue.empty()) {
      const auto [c, r] = spec_queue.front();
      spec_queue.pop_front();
      if (cached_or_reading(r.layer, r.expert)) continue;
      const std::optional<uint32_t> slot = cache->take_tail();
      if (!slot) {
        ++st.speculative_dropped;
        continue;
      }
      start_read(*slot, r.layer, r.expert, true, c);
    }
  }

  // Starts reading expert (layer, expert) into `slot` (under mu); returns
  // the read's id.
  uint64_t start_read(uint32_t slot, int32_t layer, int32_t expert, bool speculative,
                      uint32_t client) {
    if (spec_unused[slot]) {  // a guess nobody used is about to be overwritten
      spec_unused[slot] = 0;
      ++st.speculative_wasted;
    }
    SlotEntry& se = slots[slot];
    se.state.store(static_cast<uint32_t>(SlotState::kReading), std::memory_order_relaxed);
    se.generation.fetch_add(1, std::memory_order_acq_rel);
    se.layer.store(layer, std::memory_order_relaxed);
    se.expert.store(expert, std::memory_order_relaxed);
    const uint64_t slot_base = hdr->data_offset + static_cast<uint64_t>(slot) * stride;
    // Nothing is submitted before submit_locked(), so the offset is in place
    // before any byte lands.
    const uint64_t id = scheduler->start(slot, layer, expert, slot_base, speculative);
    se.data_offset.store(slot_base + scheduler->read(id).lead, std::memory_order_relaxed);
    clients[id].spec_client = client;
    return id;
  }

  // Starts what may start and queues chunks (under mu).
  void submit_locked() {
    start_speculative();
    scheduler->submit();
  }

  // The checks of an expert just read, done outside mu (hashing 17.5 MB
  // takes ~0.65 ms; under mu it would stall every client's requests). The
  // slot is READING meanwhile: no client sees it and nothing recycles it.
  struct ReadCheck {
    uint64_t id = 0;
    int32_t layer = 0, expert = 0;
    const uint8_t* bytes = nullptr;
    experts::ReadVerdict verdict;
  };

  // Never hands out NaN scales or bytes the manifest refuses; the slot is
  // not cached, so a repaired file is read again on the next request.
  void check_read(ReadCheck& c) const {
    const ExpertLocation& loc = shards->index().at(c.layer, c.expert);
    c.verdict = experts::verify_expert_read(shards->index(), shards->checkpoint().files()[loc.file],
                                            opt.manifest, c.layer, c.expert, c.bytes);
    if (!c.verdict.status.ok()) log->error("{}", msg(c.verdict.status));
  }

  // Under mu: what check_read needs of a finished read (none when it failed).
  std::optional<ReadCheck> to_check(uint64_t id) const {
    const ExpertRead& rd = scheduler->read(id);
    if (rd.failed) return std::nullopt;
    ReadCheck c;
    c.id = id;
    c.layer = rd.layer;
    c.expert = rd.expert;
    c.bytes = static_cast<const uint8_t*>(base) +
              slots[rd.slot].data_offset.load(std::memory_order_relaxed);
    return c;
  }

  // Under mu: counts a check's outcome; a refused read fails.
  void record(const ReadCheck& c) {
    const experts::ReadVerdict& v = c.verdict;
    st.corrupt_experts += v.nan_scales;
    st.manifest_mismatches += v.mismatch;
    st.verified_reads += v.verified;
    st.verify_seconds += v.verify_seconds;
    if (!v.status.ok()) scheduler->read(c.id).failed = true;
  }

  // Publishes finished read `id` to its clients (under mu).
  void finish_read(uint64_t id) {
    const ExpertRead rd = scheduler->finish(id);
    ReadClients rc = std::move(clients[id]);
    clients.erase(id);
    SlotEntry& se = slots[rd.slot];
    if (rd.failed) {
      ++st.read_errors;
      se.state.store(static_cast<uint32_t>(SlotState::kEmpty), std::memory_order_release);
      cache->release(rd.slot);
      for (const Waiter& w : rc.waiters)
        complete(w.client, w.tag, UINT32_MAX, static_cast<int32_t>(absl::StatusCode::kDataLoss));
    } else {
      ++st.reads;
      st.bytes_read += shards->index().expert_bytes();
      const double ms =
          std::chrono::duration<double, std::milli>(Clock::now() - rd.started).count();
      if (latencies_ms.size() < 4096)
        latencies_ms.push_back(ms);
      else
        latencies_ms[latency_next++ % 4096] = ms;
      se.state.store(static_cast<uint32_t>(SlotState::kReady), std::memory_order_release);
      cache->insert(rd.slot, rd.layer, rd.expert);
      for (const Waiter& w : rc.waiters)
        complete(w.client, w.tag, rd.slot, 0,
                 w.reader ? shm::kCompletionRead : (w.speculated ? shm::kCompletionSpeculated : 0));
      // Nobody asked yet: the slot waits for its first demand request.
      if (rd.speculative) spec_unused[rd.slot] = 1;
      if (rd.was_speculative) {
        ++st.speculative_reads;
        // A notice, not a lease (a client gone or full just misses a count).
        rings.publish(rc.spec_client, shm::kSpeculativeReadTag, UINT32_MAX, 0,
                      shm::kCompletionSpeculativeRead);
      }
    }
    rings.wake_pending();
  }

  void completion_loop() {
    std::vector<uint64_t> done;
    std::vector<ReadCheck> checks;
    while (running.load()) {
      if (!scheduler->wait(scheduler->throttled() ? 1 : 100)) {
        if (scheduler->throttled()) {
          std::lock_guard<std::mutex> lock(mu);
          submit_locked();
        }
        continue;
      }
      done.clear();
      checks.clear();
      std::unique_lock<std::mutex> lock(mu);
      scheduler->drain(&done);
      submit_locked();
      for (uint64_t id : done)
        if (auto c = to_check(id)) checks.push_back(*c);
      if (!checks.empty()) {
        lock.unlock();
        for (ReadCheck& c : checks) check_read(c);
        lock.lock();
        for (const ReadCheck& c : checks) record(c);
      }
      for (uint64_t id : done) finish_read(id);
    }
  }

  // Frees the client areas of processes that died, their leases and the
  // requests they left waiting (under mu).
  void reap_dead_clients() {
    const uint32_t n = rings.reclaim_dead_clients([&](uint32_t c, int pid, uint32_t released) {
      for (auto& [id, rc] : clients)
        rc.waiters.erase(std::remove_if(rc.waiters.begin(), rc.waiters.end(),
                                        [&](const Waiter& w) { return w.client == c; }),
                         rc.waiters.end());
      blocked.erase(std::remove_if(blocked.begin(), blocked.end(),
                                   [&](const auto& b) { return b.first == c; }),
                    blocked.end());
      spec_queue.erase(std::remove_if(spec_queue.begin(), spec_queue.end(),
                                      [&](const auto& b) { return b.first == c; }),
                       spec_queue.end());
      log->warn("client {} (pid {}) died: reclaimed its {} leases", c, pid, released);
    });
    reclaimed.fetch_add(n);
  }

  void request_loop() {
    auto last_reap = Clock::now();
    while (running.load()) {
      const uint32_t bell = rings.doorbell();
      bool progressed = false;
      {
        std::lock_guard<std::mutex> lock(mu);
        // Misses that waited for a slot first, in arrival order.
        while (!blocked.empty() && handle(blocked.front().first, blocked.front().second)) {
          blocked.pop_front();
          progressed = true;
        }
        const size_t taken = rings.drain_requests([&](uint32_t c, const shm::Request& r) {
          if (!blocked.empty() || !handle(c, r)) blocked.push_back({c, r});
        });
        progressed = progressed || taken > 0;
        submit_locked();
        rings.wake_pending();
        if (Clock::now() - last_reap > std::chrono::milliseconds(200) || !blocked.empty()) {
          reap_dead_clients();
          last_reap = Clock::now();
        }
      }
      if (!progressed) {
        // Blocked misses wait for a lease to be released (clients release
        // without telling us): poll at 1 ms then; otherwise sleep on the doorbell.
        rings.wait_doorbell(bell, blocked.empty() ? 200 : 1);
      }
    }
  }
};

SegmentServer::SegmentServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

SegmentServer::~SegmentServer() {
  stop();
}

StatusOr<std::unique_ptr<SegmentServer>> SegmentServer::start(const ShardSet& shards,
                                                              const SegmentServerOptions& opt) {
  auto m = std::make_unique<Impl>();
  m->shards = &shards;
  m->opt = opt;
  if (opt.queue_depth < 1 || opt.queue_depth > 4096)
    return absl::InvalidArgumentError("queue depth must be in [1, 4096]");
  if (opt.read_chunk_bytes < shm::kDataAlign || opt.read_chunk_bytes % shm::kDataAlign != 0)
    return absl::InvalidArgumentError("read chunk must be a positive multiple of 4096 bytes");
  const ModelConfig& c = shards.config();
  if (c.num_moe_layers() == 0) return absl::FailedPreconditionError("the model has no MoE layers");
  const int64_t last = opt.last_layer < 0 ? c.num_hidden_layers - 1 : opt.last_layer;
  if (opt.first_layer < 0 || last >= c.num_hidden_layers || opt.first_layer > last)
    return absl::InvalidArgumentError(cat("served layers [", opt.first_layer, ", ", last,
                                          "] are outside the model's [0, ", c.num_hidden_layers - 1,
                                          "]"));

  shm::Geometry g;
  g.num_layers = static_cast<uint32_t>(c.num_hidden_layers);
  g.num_experts = static_cast<uint32_t>(c.num_experts);
  g.first_moe_layer = static_cast<uint32_t>(c.first_k_dense_replace);
  g.expert_bytes = shards.index().expert_bytes();
  const uint64_t want = opt.cache_bytes / g.slot_stride();
  g.slot_count = static_cast<uint32_t>(std::clamp<uint64_t>(want, 2, 1u << 24));

  // An existing segment: refuse a live owner, replace a dead one's.
  if (shm::Segment::exists(opt.segment)) {
    auto old = shm::Segment::open(opt.segment);
    // Another user's file under our name is not ours to replace (and in the
    // sticky /dev/shm could not be removed anyway): say whose it is.
    if (old.status().code() == absl::StatusCode::kPermissionDenied) return old.status();
    if (old.ok() && old->size() >= sizeof(Header)) {
      Header* oh = shm::header_of(old->base());
      const int pid = oh->server_pid.load();
      if (oh->magic == shm::kMagic && pid != 0 && pid != ::getpid() &&
          shm::process_alive(pid, oh->server_start_time))
        return absl::AlreadyExistsError(cat("shared-memory segment ",
                                            shm::segment_path(opt.segment),
                                            " is served by a live expertd (pid ", pid, ")"));
    }
    m->log->warn("replacing stale segment {}", shm::segment_path(opt.segment));
    shm::Segment::remove(opt.segment);
  }
  K3_ASSIGN_OR_RETURN(m->seg, shm::Segment::create(opt.segment, g.total_bytes(), opt.segment_mode));
  m->base = m->seg.base();
  Header* h = m->hdr = shm::header_of(m->base);
  shm::init_header(m->base, g, shards.checkpoint().fingerprint(),
                   std::random_device{}() | (static_cast<uint64_t>(std::random_device{}()) << 32));
  h->server_start_time = shm::process_start_time(::getpid());
  for (int64_t l = std::max<int64_t>(opt.first_layer, c.first_k_dense_replace); l <= last; ++l)
    for (int64_t e = 0; e < c.num_experts; ++e) {
      if (!shards.owns(l, e)) continue;
      const uint64_t bit = static_cast<uint64_t>(l) * g.num_experts + e;
      shm::served_of(m->base)[bit / 64].fetch_or(1ull << (bit % 64));
    }
  m->rings = shm::ServerRing(m->base);
  m->slots = shm::slots_of(m->base);
  m->nslots = g.slot_count;
  m->stride = g.slot_stride();
  m->spec_unused.assign(m->nslots, 0);
  m->cache = std::make_unique<experts::SlotLru>(
      m->nslots, g.num_experts, [p = m.get()](uint32_t slot) { return p->rings.pinned(slot); });
  ReaderOptions ro;
  ro.queue_depth = opt.queue_depth;
  ro.direct = opt.direct;
  K3_ASSIGN_OR_RETURN(m->reader,
                      UringReader::open(shards.checkpoint().files(), ro,
                                        static_cast<uint8_t*>(m->base) + h->data_offset,
                                        static_cast<uint64_t>(m->nslots) * m->stride, m->stride));
  m->direct = m->reader->direct();
  m->st.direct = m->direct;
  ReadSchedulerOptions so;
  so.queue_depth = opt.queue_depth;
  so.read_chunk_bytes = opt.read_chunk_bytes;
  so.read_limit_mbps = opt.read_limit_mbps;
  so.direct = m->direct;
  m->scheduler =
      std::make_unique<ReadScheduler>(shards, *m->reader, static_cast<uint8_t*>(m->base), so);
  h->read_flags = m->direct ? 0 : shm::kReadsBuffered;
  h->server_pid.store(::getpid());
  h->magic = shm::kMagic;
  h->ready.store(1, std::memory_order_release);
  m->running.store(true);
  Impl* p = m.get();
  m->request_thread = std::thread([p] { p->request_loop(); });
  m->completion_thread = std::thread([p] { p->completion_loop(); });
  m->log->info(
      "segment {} (mode 0{:o}): {} slots of {} bytes ({:.2f} GB), {} reads, queue depth {}, "
      "read chunk {} bytes, {} fixed buffers",
      shm::segment_path(opt.segment), opt.segment_mode, m->nslots, m->stride, g.total_bytes() / 1e9,
      m->direct ? "O_DIRECT" : "buffered", opt.queue_depth, opt.read_chunk_bytes,
      m->reader->fixed_buffers() ? "with" : "without");
  return std::unique_ptr<SegmentServer>(new SegmentServer(std::move(m)));
}

void SegmentServer::stop() {
  Impl& m = *impl_;
  if (!m.running.exchange(false)) return;
  m.hdr->ready.store(0, std::memory_order_release);
  shm::futex_wake_all(&m.hdr->doorbell);
  if (m.request_thread.joinable()) m.request_thread.join();
  if (m.completion_thread.joinable()) m.completion_thread.join();
  // Wake every client so it notices the server is gone.
  {
    std::lock_guard<std::mutex> lock(m.mu);
    m.rings.wake_all();
  }
  m.hdr->server_pid.store(0);
  shm::Segment::remove(m.opt.segment);
  m.log->info("segment {} removed", shm::segment_path(m.opt.segment));
}

SegmentServerStats SegmentServer::stats() const {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  SegmentServerStats s = m.st;
  const ReadSchedulerStats& rs = m.scheduler->stats();
  s.io_errors = rs.io_errors;
  s.read_seconds = rs.read_seconds;
  s.read_limit_waits = rs.read_limit_waits;
  s.read_limit_wait_seconds = rs.read_limit_wait_seconds;
  s.queue_depth = static_cast<uint32_t>(m.scheduler->in_flight());
  s.slots = m.nslots;
  s.slots_pinned = m.rings.pinned_slots();
  s.clients = m.rings.active_clients();
  s.reclaimed_clients = m.reclaimed.load();
  if (!m.latencies_ms.empty()) {
    std::vector<double> v = m.latencies_ms;
    std::sort(v.begin(), v.end());
    s.p50_ms = v[v.size() / 2];
    s.p99_ms = v[std::min(v.size() - 1, v.size() * 99 / 100)];
    s.max_ms = v.back();
  }
  return s;
}

const std::string& SegmentServer::segment_name() const {
  return impl_->opt.segment;
}
bool SegmentServer::serves(int64_t layer, int64_t expert) const {
  return layer >= 0 && expert >= 0 &&
         shm::serves(impl_->base, static_cast<uint32_t>(layer), static_cast<uint32_t>(expert));
}
uint32_t SegmentServer::slot_count() const {
  return impl_->nslots;
}
uint64_t SegmentServer::slot_stride() const {
  return impl_->stride;
}

}  // namespace k3::expertd
