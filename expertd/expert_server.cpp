#include "expertd/expert_server.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>
#include <vector>

#include "expertd/uring_reader.h"
#include "shared/base/log.h"
#include "shared/experts/slot_lru.h"
#include "shared/experts/verified_read.h"
#include "shared/shm/futex.h"
#include "shared/shm/layout.h"
#include "shared/shm/segment.h"
#include "shared/shm/server_ring.h"

namespace k3::expertd {

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

// One expert being read into one slot, in one or more chunks.
struct Read {
  uint32_t slot = 0;
  int32_t layer = 0, expert = 0;
  uint32_t file = 0;
  uint64_t file_offset = 0;  // 4 KiB aligned (O_DIRECT) or the expert's own offset
  uint64_t length = 0;       // bytes to read from file_offset
  uint64_t needed = 0;       // bytes that must arrive (to the expert's end)
  uint64_t dst = 0;          // segment offset the read lands at
  uint64_t next_chunk = 0;   // bytes already submitted
  int chunks_in_flight = 0;
  bool failed = false;
  // Started by a prefetch and not yet joined by a demand request.
  bool speculative = false;
  bool was_speculative = false;  // started by a prefetch (joined or not)
  uint32_t spec_client = 0;      // the prefetch's client (told when the bytes are in)
  Clock::time_point started;
  std::vector<Waiter> waiters;
};

// Prefetches waiting for a speculative place, at most (older ones dropped).
constexpr size_t kSpecQueue = 256;

struct Chunk {
  uint64_t read_id;
  uint64_t offset;  // within the read
  uint64_t len;
};
}  // namespace

struct ExpertServer::Impl {
  const ShardSet* shards = nullptr;
  ServerOptions opt;
  shm::Segment seg;
  void* base = nullptr;
  Header* hdr = nullptr;
  shm::ServerRing rings;
  SlotEntry* slots = nullptr;
  uint32_t nslots = 0;
  uint64_t stride = 0;
  std::shared_ptr<spdlog::logger> log = logger("expertd");

  std::unique_ptr<UringReader> reader;
  bool direct = false;

  // State below is guarded by mu.
  mutable std::mutex mu;
  std::unique_ptr<experts::SlotLru> cache;        // READY slots
  std::unordered_map<int64_t, uint64_t> reading;  // key -> read id
  std::unordered_map<uint64_t, Read> reads;       // read id -> read
  uint64_t next_read_id = 1;
  std::deque<uint64_t> to_submit;  // demand read ids with chunks left, disk order
  // Speculative reads: started ones with chunks left (submitted only when no
  // demand chunk waits), and prefetches waiting for one of the
  // kSpeculativeInFlight places (client, request), oldest first.
  std::deque<uint64_t> spec_submit;
  std::deque<std::pair<uint32_t, shm::Request>> spec_queue;
  int spec_active = 0;                         // speculative reads started, not finished or joined
  std::vector<uint8_t> spec_unused;            // per slot: read speculatively, no demand served yet
  std::unordered_map<uint64_t, Chunk> chunks;  // chunk id (io_uring user data) -> chunk
  uint64_t next_chunk_id = 1;
  std::deque<std::pair<uint32_t, shm::Request>> blocked;  // misses waiting for a free slot
  int in_flight = 0;
  ServerStats st;
  std::vector<double> latencies_ms;  // recent read latencies (ring)
  size_t latency_next = 0;
  Clock::time_point busy_since;
  // --read-limit-mbps: bytes that may be submitted now (negative: in debt
  // for a chunk larger than what had accrued), refilled at the limit.
  double bucket = 0;
  Clock::time_point bucket_time = Clock::now();
  std::atomic<bool> throttled{false};
  Clock::time_point throttled_since;

  // Under mu: whether a chunk may be submitted now (taking its bytes).
  bool take_read_budget(uint64_t len) {
    if (!(opt.read_limit_mbps > 0)) return true;
    const auto now = Clock::now();
    const double rate = opt.read_limit_mbps * 1e6;  // bytes per second
    // At most 10 ms of reads (or one chunk) accrue while idle.
    const double burst = std::max(rate * 0.01, static_cast<double>(opt.read_chunk_bytes));
    bucket =
        std::min(burst, bucket + std::chrono::duration<double>(now - bucket_time).count() * rate);
    bucket_time = now;
    if (bucket < 0) {
      if (!throttled.exchange(true)) {
        throttled_since = now;
        ++st.read_limit_waits;
      }
      return false;
    }
    if (throttled.exchange(false))
      st.read_limit_wait_seconds += std::chrono::duration<double>(now - throttled_since).count();
    bucket -= static_cast<double>(len);
    return true;
  }

  std::atomic<bool> running{false};
  std::thread request_thread, completion_thread;
  std::atomic<uint64_t> reclaimed{0};

  int64_t key(int32_t l, int32_t e) const { return static_cast<int64_t>(l) * hdr->num_experts + e; }

  // A completion to a client (under mu); woken by rings.wake_pending().
  void complete(uint32_t c, uint32_t tag, uint32_t slot, int32_t status, uint32_t flags = 0) {
    if (!rings.publish(c, tag, slot, status, flags))
      log->warn("client {} is gone or its completion ring is full; dropping a completion", c);
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
    const int64_t k = key(r.layer, r.expert);
    if (prefetch) {
      // A guess waits for a speculative place (start_speculative()); the
      // oldest guesses go first when too many wait.
      if (cache->contains(r.layer, r.expert) || reading.count(k)) return true;
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
    if (auto it = reading.find(k); it != reading.end()) {
      ++st.hits;  // joins a read in flight
      Read& rd = reads[it->second];
      const bool speculated = rd.speculative;
      if (speculated) promote(it->second);
      rd.waiters.push_back({c, r.tag, false, speculated});
      return true;
    }
    const std::optional<uint32_t> taken = cache->take();
    if (!taken) return false;
    start_read(*taken, r.layer, r.expert, false, c);
    ++st.misses;
    reads[next_read_id - 1].waiters.push_back({c, r.tag, true, false});
    return true;
  }

  // A demand request joined speculative read `id`: from now on it is a
  // demand read (its chunks left go ahead of every speculative one).
  void promote(uint64_t id) {
    Read& rd = reads[id];
    rd.speculative = false;
    --spec_active;
    ++st.speculative_used;
    auto it = std::find(spec_submit.begin(), spec_submit.end(), id);
    if (it != spec_submit.end()) {
      spec_submit.erase(it);
      to_submit.push_back(id);
    }
  }

  // Starts waiting prefetches while fewer than kSpeculativeInFlight
  // speculative reads run (under mu). A guess takes an empty slot or the
  // LRU tail, never more; without one it is dropped.
  void start_speculative() {
    while (spec_active < shm::kSpeculativeInFlight && !spec_queue.empty()) {
      const auto [c, r] = spec_queue.front();
      spec_queue.pop_front();
      if (cache->contains(r.layer, r.expert) || reading.count(key(r.layer, r.expert))) continue;
      const std::optional<uint32_t> slot = cache->take_tail();
      if (!slot) {
        ++st.speculative_dropped;
        continue;
      }
      start_read(*slot, r.layer, r.expert, true, c);
      ++spec_active;
    }
  }

  // Slot `slot` is about to hold another expert (under mu).
  void recycle(uint32_t slot) {
    if (spec_unused[slot]) {
      spec_unused[slot] = 0;
      ++st.speculative_wasted;
    }
  }

  // Starts reading expert (layer, expert) into `slot` (under mu).
  void start_read(uint32_t slot, int32_t layer, int32_t expert, bool speculative, uint32_t client) {
    recycle(slot);
    const ExpertLocation& loc = shards->index().at(layer, expert);
    SlotEntry& se = slots[slot];
    se.state.store(static_cast<uint32_t>(SlotState::kReading), std::memory_order_relaxed);
    se.generation.fetch_add(1, std::memory_order_acq_rel);
    se.layer.store(layer, std::memory_order_relaxed);
    se.expert.store(expert, std::memory_order_relaxed);
    Read rd;
    rd.slot = slot;
    rd.layer = layer;
    rd.expert = expert;
    rd.file = loc.file;
    const uint64_t len = shards->index().expert_bytes();
    const uint64_t slot_base = hdr->data_offset + static_cast<uint64_t>(slot) * stride;
    const shm::ReadSpan span = shm::expert_read_span(loc.offset, len, direct);
    rd.file_offset = span.file_offset;
    rd.length = span.length;
    rd.needed = span.needed;
    se.data_offset.store(slot_base + span.lead, std::memory_order_relaxed);
    rd.dst = slot_base;
    rd.started = Clock::now();
    rd.speculative = rd.was_speculative = speculative;
    rd.spec_client = client;
    const uint64_t id = next_read_id++;
    reads.emplace(id, std::move(rd));
    reading[key(layer, expert)] = id;
    (speculative ? spec_submit : to_submit).push_back(id);
  }

  // Puts chunks in the submission queue up to the queue depth (under mu).
  void submit_locked() {
    start_speculative();
    if (in_flight >= opt.queue_depth) return;
    int queued = submit_from(to_submit);
    // Speculative chunks only when no demand chunk waits.
    if (to_submit.empty()) queued += submit_from(spec_submit);
    if (queued > 0) reader->submit();
  }

  // Queues chunks of the reads in `q` (demand or speculative) up to the
  // queue depth; returns how many (under mu).
  int submit_from(std::deque<uint64_t>& q) {
    std::deque<uint64_t>& to_submit = q;
    if (to_submit.empty() || in_flight >= opt.queue_depth) return 0;
    // Disk order across the queued reads (file, offset).
    std::stable_sort(to_submit.begin(), to_submit.end(), [&](uint64_t a, uint64_t b) {
      const Read& ra = reads[a];
      const Read& rb = reads[b];
      return ra.file != rb.file ? ra.file < rb.file : ra.file_offset < rb.file_offset;
    });
    int queued = 0;
    while (!to_submit.empty() && in_flight < opt.queue_depth) {
      Read& rd = reads[to_submit.front()];
      const uint64_t id = to_submit.front();
      const uint64_t off = rd.next_chunk;
      const uint64_t len = std::min(opt.read_chunk_bytes, rd.length - off);
      uint8_t* dst = static_cast<uint8_t*>(base) + rd.dst + off;
      if (!take_read_budget(len)) break;  // the completion loop retries shortly
      const uint64_t chunk_id = next_chunk_id++;
      if (!reader->queue(rd.file, rd.file_offset + off, dst, static_cast<uint32_t>(len), chunk_id))
        break;
      chunks.emplace(chunk_id, Chunk{id, off, len});
      rd.next_chunk += len;
      ++rd.chunks_in_flight;
      if (in_flight == 0) busy_since = Clock::now();
      ++in_flight;
      ++queued;
      if (rd.next_chunk >= rd.length) to_submit.pop_front();
    }
    return queued;
  }

  // The checks of an expert just read, done outside mu (hashing 17.5 MB
  // takes ~0.65 ms; under mu it would stall every client's requests). The
  // slot is READING meanwhile: no client sees it and nothing recycles it.
  struct ReadCheck {
    uint64_t id = 0;
    int32_t layer = 0, expert = 0;
    const uint8_t* bytes = nullptr;
    bool nan_scales = false, verified = false, mismatch = false;
    double verify_seconds = 0;
  };

  // Never hands out NaN scales or bytes the manifest refuses; the slot is
  // not cached, so a repaired file is read again on the next request.
  void check_read(ReadCheck& c) const {
    const ExpertLocation& loc = shards->index().at(c.layer, c.expert);
    const experts::ReadVerdict v =
        experts::verify_expert_read(shards->index(), shards->checkpoint().files()[loc.file],
                                    opt.manifest, c.layer, c.expert, c.bytes);
    if (!v.status.ok()) log->error("{}", msg(v.status));
    c.nan_scales = v.nan_scales;
    c.verified = v.verified;
    c.mismatch = v.mismatch;
    c.verify_seconds = v.verify_seconds;
  }

  // Under mu: what check_read needs of a finished read (none when it failed).
  std::optional<ReadCheck> to_check(uint64_t id) const {
    const Read& rd = reads.at(id);
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
    Read& rd = reads.at(c.id);
    st.corrupt_experts += c.nan_scales;
    st.manifest_mismatches += c.mismatch;
    st.verified_reads += c.verified;
    st.verify_seconds += c.verify_seconds;
    if (c.nan_scales || c.mismatch) rd.failed = true;
  }

  void finish_read(uint64_t id) {
    Read rd = std::move(reads[id]);
    reads.erase(id);
    reading.erase(key(rd.layer, rd.expert));
    SlotEntry& se = slots[rd.slot];
    if (rd.failed) {
      ++st.read_errors;
      se.state.store(static_cast<uint32_t>(SlotState::kEmpty), std::memory_order_release);
      cache->release(rd.slot);
      for (const Waiter& w : rd.waiters)
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
      for (const Waiter& w : rd.waiters)
        complete(w.client, w.tag, rd.slot, 0,
                 w.reader ? shm::kCompletionRead : (w.speculated ? shm::kCompletionSpeculated : 0));
      // Nobody asked yet: the slot waits for its first demand request.
      if (rd.speculative) spec_unused[rd.slot] = 1;
      if (rd.was_speculative) {
        ++st.speculative_reads;
        // A notice, not a lease (a client gone or full just misses a count).
        rings.publish(rd.spec_client, shm::kSpeculativeReadTag, UINT32_MAX, 0,
                      shm::kCompletionSpeculativeRead);
      }
    }
    if (rd.speculative) --spec_active;
    rings.wake_pending();
  }

  void completion_loop() {
    std::vector<uint64_t> done;
    std::vector<ReadCheck> checks;
    while (running.load()) {
      if (!reader->wait(throttled.load() ? 1 : 100)) {
        if (throttled.load()) {
          std::lock_guard<std::mutex> lock(mu);
          submit_locked();
        }
        continue;
      }
      done.clear();
      checks.clear();
      std::unique_lock<std::mutex> lock(mu);
      reader->drain([&](uint64_t chunk_id, int res) {
        auto ck = chunks.find(chunk_id);
        if (ck == chunks.end()) return;
        const Chunk c = ck->second;
        chunks.erase(ck);
        Read& rd = reads[c.read_id];
        // Bytes of this chunk that must arrive: the tail of an O_DIRECT read may
        // run past the end of the file.
        const uint64_t need = c.offset >= rd.needed ? 0 : std::min(c.len, rd.needed - c.offset);
        if (res < 0 || static_cast<uint64_t>(res) < need) {
          // The first failed chunk of a read names the shard and the range;
          // the slot is not cached, so the next request reads it again.
          if (!rd.failed)
            log->error(
                "read of expert {} of layer {} failed: {} at offset {} ({} bytes, the expert at "
                "offset {}): {}",
                rd.expert, rd.layer, shards->checkpoint().files()[rd.file],
                rd.file_offset + c.offset, c.len, shards->index().at(rd.layer, rd.expert).offset,
                res < 0 ? std::string(std::strerror(-res))
                        : cat("short read (", res, " of ", need, " bytes)"));
          rd.failed = true;
          ++st.io_errors;
        }
        --rd.chunks_in_flight;
        --in_flight;
        if (in_flight == 0)
          st.read_seconds += std::chrono::duration<double>(Clock::now() - busy_since).count();
        if (rd.chunks_in_flight == 0 && rd.next_chunk >= rd.length) done.push_back(c.read_id);
      });
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
      for (auto& [id, rd] : reads)
        rd.waiters.erase(std::remove_if(rd.waiters.begin(), rd.waiters.end(),
                                        [&](const Waiter& w) { return w.client == c; }),
                         rd.waiters.end());
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

ExpertServer::ExpertServer(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}

ExpertServer::~ExpertServer() {
  stop();
}

StatusOr<std::unique_ptr<ExpertServer>> ExpertServer::start(const ShardSet& shards,
                                                            const ServerOptions& opt) {
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
  return std::unique_ptr<ExpertServer>(new ExpertServer(std::move(m)));
}

void ExpertServer::stop() {
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

ServerStats ExpertServer::stats() const {
  Impl& m = *impl_;
  std::lock_guard<std::mutex> lock(m.mu);
  ServerStats s = m.st;
  s.queue_depth = static_cast<uint32_t>(m.in_flight);
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

const std::string& ExpertServer::segment_name() const {
  return impl_->opt.segment;
}
bool ExpertServer::serves(int64_t layer, int64_t expert) const {
  return layer >= 0 && expert >= 0 &&
         shm::serves(impl_->base, static_cast<uint32_t>(layer), static_cast<uint32_t>(expert));
}
uint32_t ExpertServer::slot_count() const {
  return impl_->nslots;
}
uint64_t ExpertServer::slot_stride() const {
  return impl_->stride;
}

}  // namespace k3::expertd
