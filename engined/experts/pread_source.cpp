#include "engined/experts/pread_source.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "absl/strings/str_join.h"
#include "shared/base/log.h"
#include "shared/experts/slot_lru.h"
#include "shared/experts/verified_read.h"
#include "shared/shm/layout.h"
#include "shared/shm/read_span.h"

namespace k3::engined {

namespace {

using Clock = std::chrono::steady_clock;

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};

struct Slot {
  std::unique_ptr<uint8_t, AlignedFree> buf;
  uint64_t data_offset = 0;  // where the expert starts inside buf
  bool busy = false;         // being read, or its bytes are in use
  bool spec_unused = false;  // read speculatively, no demand request served yet
};

struct Job {
  size_t slot = 0;
  int64_t layer = 0, expert = 0;
  bool speculative = false;
};

struct Done {
  Job job;
  Status status;
  // What the read's checks found (counted by the caller's thread).
  bool nan_scales = false, verified = false, mismatch = false;
  double verify_seconds = 0;
};

}  // namespace

struct PreadExpertSource::Impl {
  // Set by open(): the checkpoint and index this source owns.
  std::unique_ptr<checkpoint::Checkpoint> own_ck;
  std::unique_ptr<checkpoint::ExpertIndex> own_index;
  const checkpoint::Checkpoint* ck = nullptr;
  const checkpoint::ExpertIndex* index = nullptr;
  experts::ExpertShape shape;
  PreadSourceOptions opt;
  std::vector<int> direct_fds;  // per shard, -1 when O_DIRECT is unavailable
  bool direct = false;
  uint64_t slot_bytes = 0;
  std::vector<Slot> slots;
  std::unique_ptr<experts::SlotLru> cache;      // which slot holds which expert
  std::unordered_map<int64_t, size_t> reading;  // key -> slot being read
  experts::ExpertSourceStats st;

  // The demand request in flight (caller's thread only).
  experts::ExpertRequest req;
  std::deque<std::pair<size_t, size_t>> ready;  // (work index, slot) with bytes
  std::unordered_map<int64_t, size_t> waiting;  // key being read -> work index
  std::vector<size_t> misses;                   // work indices to read, disk order
  size_t next_miss = 0;
  size_t left = 0;                  // completions not yet polled
  std::optional<size_t> held;       // slot whose bytes the caller holds
  std::deque<int64_t> speculative;  // keys to read ahead
  int speculative_in_flight = 0;

  // Shared with the loader threads.
  std::mutex mu;
  std::condition_variable job_cv, done_cv;
  std::deque<Job> demand_jobs, speculative_jobs;
  std::deque<Done> done;
  bool stopping = false;
  std::vector<std::thread> threads;

  ~Impl() {
    {
      std::lock_guard<std::mutex> lock(mu);
      stopping = true;
    }
    job_cv.notify_all();
    for (auto& t : threads) t.join();
    for (int fd : direct_fds)
      if (fd >= 0) ::close(fd);
  }

  int64_t key_of(int64_t layer, int64_t expert) const {
    return layer * index->num_experts() + expert;
  }

  // Reads one expert into its slot and checks it (verified_read.h; runs on
  // a loader thread).
  void read(const Job& j, Slot& slot, Done* d) {
    d->status = read_bytes(j, slot);
    if (!d->status.ok()) return;
    const checkpoint::ExpertLocation& loc = index->at(j.layer, j.expert);
    const experts::ReadVerdict v =
        experts::verify_expert_read(*index, ck->files()[loc.file], opt.manifest.get(), j.layer,
                                    j.expert, slot.buf.get() + slot.data_offset);
    d->status = v.status;
    d->nan_scales = v.nan_scales;
    d->verified = v.verified;
    d->mismatch = v.mismatch;
    d->verify_seconds = v.verify_seconds;
    if (v.mismatch) base::logger("engined")->error("{}", msg(v.status));
  }

  Status read_bytes(const Job& j, Slot& slot) {
    const checkpoint::ExpertLocation& loc = index->at(j.layer, j.expert);
    const uint64_t len = index->expert_bytes();
    uint8_t* buf = slot.buf.get();
    if (loc.contiguous && direct_fds[loc.file] >= 0) {
      const shm::ReadSpan span = shm::expert_read_span(loc.offset, len, /*direct=*/true);
      uint64_t done_bytes = 0;
      while (done_bytes < span.length) {
        ssize_t r = ::pread(direct_fds[loc.file], buf + done_bytes, span.length - done_bytes,
                            static_cast<off_t>(span.file_offset + done_bytes));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
          return absl::DataLossError(cat(ck->files()[loc.file], ": O_DIRECT read at ",
                                         span.file_offset, " failed: ", std::strerror(errno)));
        if (r == 0) break;  // end of file inside the last aligned block
        done_bytes += static_cast<uint64_t>(r);
      }
      if (done_bytes < span.needed)
        return absl::DataLossError(
            cat(ck->files()[loc.file], ": short read of expert ", j.expert, " of layer ", j.layer));
      slot.data_offset = span.lead;
      return absl::OkStatus();
    }
    slot.data_offset = 0;
    if (loc.contiguous) return ck->file(loc.file).pread_exact(buf, len, loc.offset);
    const checkpoint::ExpertLayout& lay = index->layout();
    for (int i = 0; i < 6; ++i)
      K3_RETURN_IF_ERROR(
          ck->file(loc.file).pread_exact(buf + lay.offset[i], lay.nbytes[i], loc.tensor_offset[i]));
    return absl::OkStatus();
  }

  void loader() {
    for (;;) {
      Job j;
      {
        std::unique_lock<std::mutex> lock(mu);
        job_cv.wait(lock,
                    [&] { return stopping || !demand_jobs.empty() || !speculative_jobs.empty(); });
        if (stopping) return;
        std::deque<Job>& q = !demand_jobs.empty() ? demand_jobs : speculative_jobs;
        j = q.front();
        q.pop_front();
      }
      Done d;
      d.job = j;
      read(j, slots[j.slot], &d);
      {
        std::lock_guard<std::mutex> lock(mu);
        done.push_back(std::move(d));
      }
      done_cv.notify_one();
    }
  }

  void start_read(size_t slot, int64_t layer, int64_t expert, bool speculative_read) {
    slots[slot].busy = true;
    slots[slot].spec_unused = false;
    reading[key_of(layer, expert)] = slot;
    {
      std::lock_guard<std::mutex> lock(mu);
      (speculative_read ? speculative_jobs : demand_jobs)
          .push_back({slot, layer, expert, speculative_read});
    }
    job_cv.notify_one();
  }

  // Starts demand reads while slots allow, then speculative ones if no
  // demand read is waiting for a slot.
  void dispatch() {
    while (next_miss < misses.size()) {
      const std::optional<uint32_t> slot = cache->take();
      if (!slot) return;
      const experts::ExpertWork& w = req.work[misses[next_miss]];
      waiting[key_of(req.layer, w.expert)] = misses[next_miss];
      start_read(*slot, req.layer, w.expert, false);
      ++next_miss;
    }
    const int64_t E = index->num_experts();
    while (speculative_in_flight < shm::kSpeculativeInFlight && !speculative.empty()) {
      const int64_t key = speculative.front();
      const auto layer = static_cast<int32_t>(key / E), expert = static_cast<int32_t>(key % E);
      if (cache->contains(layer, expert) || reading.count(key)) {
        speculative.pop_front();
        continue;
      }
      const std::optional<uint32_t> slot = cache->take_tail();
      if (!slot) return;
      speculative.pop_front();
      start_read(*slot, layer, expert, true);
      ++speculative_in_flight;
    }
  }

  // Takes in one finished read. Error: a demand read of the request failed.
  Status take_done(Done d) {
    const int64_t key = key_of(d.job.layer, d.job.expert);
    Slot& slot = slots[d.job.slot];
    reading.erase(key);
    if (d.job.speculative) --speculative_in_flight;
    st.corrupt_experts += d.nan_scales;
    st.manifest_mismatches += d.mismatch;
    st.verified_reads += d.verified;
    st.verify_seconds += d.verify_seconds;
    if (d.status.ok()) {
      cache->insert(static_cast<uint32_t>(d.job.slot), static_cast<int32_t>(d.job.layer),
                    static_cast<int32_t>(d.job.expert));
      if (d.job.speculative) {
        ++st.speculative_reads;
        st.speculative_bytes += index->expert_bytes();
      }
    } else {
      cache->release(static_cast<uint32_t>(d.job.slot));
    }
    // No waiter: a speculative read, or one of a replaced request.
    auto w = waiting.find(key);
    if (w == waiting.end()) {
      slot.busy = false;
      slot.spec_unused = d.job.speculative && d.status.ok();
      return absl::OkStatus();
    }
    const size_t idx = w->second;
    waiting.erase(w);
    if (!d.status.ok()) {
      slot.busy = false;
      return d.status;
    }
    if (d.job.speculative) {
      // A demand request joined the speculative read.
      ++st.hits;
      ++st.speculative_hits;
    } else {
      ++st.reads;
      st.bytes_read += index->expert_bytes();
    }
    ready.push_back({idx, d.job.slot});  // stays busy until polled
    return absl::OkStatus();
  }

  // Takes in every finished read without waiting.
  Status take_all_done() {
    std::deque<Done> got;
    {
      std::lock_guard<std::mutex> lock(mu);
      got.swap(done);
    }
    Status result;
    for (Done& d : got) {
      Status s = take_done(std::move(d));
      if (result.ok()) result = s;
    }
    return result;
  }

  void release_held() {
    if (held) slots[*held].busy = false;
    held.reset();
  }

  // Drops the demand request in flight: its reads finish into the cache.
  void abandon() {
    for (auto& [idx, slot] : ready) slots[slot].busy = false;
    ready.clear();
    waiting.clear();
    misses.clear();
    next_miss = 0;
    left = 0;
  }
};

PreadExpertSource::PreadExpertSource(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreadExpertSource::~PreadExpertSource() = default;

StatusOr<std::unique_ptr<PreadExpertSource>> PreadExpertSource::create(
    const checkpoint::Checkpoint& ck, const checkpoint::ExpertIndex& index,
    const experts::ExpertShape& shape, const PreadSourceOptions& opt) {
  auto impl = std::make_unique<Impl>();
  impl->ck = &ck;
  impl->index = &index;
  impl->shape = shape;
  impl->opt = opt;
  impl->slot_bytes = shm::expert_slot_stride(index.expert_bytes());
  const int threads = std::clamp(opt.threads, 1, 64);
  size_t nslots = static_cast<size_t>(opt.cache_bytes / impl->slot_bytes);
  nslots = std::max<size_t>(nslots, static_cast<size_t>(threads) + 1);
  impl->slots.resize(nslots);
  impl->cache = std::make_unique<experts::SlotLru>(
      static_cast<uint32_t>(nslots), static_cast<uint32_t>(index.num_experts()),
      [p = impl.get()](uint32_t slot) { return p->slots[slot].busy; });
  for (auto& s : impl->slots) {
    void* p = nullptr;
    if (posix_memalign(&p, shm::kDirectAlign, impl->slot_bytes) != 0)
      return absl::ResourceExhaustedError(cat("cannot allocate ", nslots, " expert slots"));
    s.buf.reset(static_cast<uint8_t*>(p));
  }
  impl->direct_fds.assign(ck.files().size(), -1);
  if (opt.direct) {
    int opened = 0;
    for (size_t i = 0; i < ck.files().size(); ++i) {
      impl->direct_fds[i] = ::open(ck.files()[i].c_str(), O_RDONLY | O_DIRECT | O_CLOEXEC);
      opened += impl->direct_fds[i] >= 0;
    }
    impl->direct = opened == static_cast<int>(ck.files().size());
    if (!impl->direct)
      base::logger("engined")->warn(
          "O_DIRECT refused for {} of {} shards (tmpfs?): buffered reads there",
          ck.files().size() - opened, ck.files().size());
  }
  for (int i = 0; i < threads; ++i) impl->threads.emplace_back([p = impl.get()] { p->loader(); });
  return std::unique_ptr<PreadExpertSource>(new PreadExpertSource(std::move(impl)));
}

StatusOr<std::unique_ptr<PreadExpertSource>> PreadExpertSource::open(
    const std::string& model_dir, const std::vector<std::string>& extra_dirs,
    const checkpoint::ModelConfig& config, const PreadSourceOptions& opt) {
  K3_ASSIGN_OR_RETURN(auto ck, checkpoint::Checkpoint::open(model_dir, extra_dirs,
                                                            checkpoint::ShardPolicy::kPresent));
  K3_ASSIGN_OR_RETURN(checkpoint::ExpertIndex index,
                      checkpoint::ExpertIndex::build(*ck, config, /*partial=*/true));
  if (index.present_count() != index.total_count()) {
    // The absent shards that held experts (not those of the vision tower).
    std::vector<std::string> absent;
    for (const std::string& s : ck->unopened_shards())
      if (std::none_of(ck->missing_unused_shards().begin(), ck->missing_unused_shards().end(),
                       [&](const checkpoint::MissingShard& m) { return m.shard == s; }))
        absent.push_back(s);
    return absl::FailedPreconditionError(cat(
        "the shards found hold ", index.present_count(), " of the model's ", index.total_count(),
        " routed experts",
        absent.empty()
            ? std::string(" (the index names no shard holding the rest: a dense-only container?)")
            : cat(" (absent: ", absl::StrJoin(absent, ", "), ")"),
        "; add the --shard-dir holding them or take experts from --expertd"));
  }
  auto owned_index = std::make_unique<checkpoint::ExpertIndex>(std::move(index));
  K3_ASSIGN_OR_RETURN(auto src, create(*ck, *owned_index, experts::ExpertShape::of(config), opt));
  src->impl_->own_ck = std::move(ck);
  src->impl_->own_index = std::move(owned_index);
  return src;
}

bool PreadExpertSource::direct() const {
  return impl_->direct;
}

experts::ExpertSourceStats PreadExpertSource::stats() const {
  return impl_->st;
}

bool PreadExpertSource::owns(int64_t layer, int64_t expert) const {
  return impl_->index->present(layer, expert);
}

size_t PreadExpertSource::outstanding() const {
  return impl_->left;
}

Status PreadExpertSource::submit(const experts::ExpertRequest& r) {
  Impl& m = *impl_;
  m.release_held();
  K3_RETURN_IF_ERROR(experts::check_request(r, m.index->num_experts()));
  for (const experts::ExpertWork& w : r.work)
    if (!owns(r.layer, w.expert))
      return absl::NotFoundError(
          cat("expert ", w.expert, " of layer ", r.layer, " is not in the checkpoint"));
  if (r.priority == experts::ExpertPriority::kSpeculative) {
    for (const experts::ExpertWork& w : r.work) {
      m.speculative.push_back(m.key_of(r.layer, w.expert));
      ++m.st.speculative;
    }
    // Only the newest layer's guesses are worth reading.
    while (m.speculative.size() > r.work.size()) m.speculative.pop_front();
    m.dispatch();
    return absl::OkStatus();
  }
  // Finished reads first: their slots go back to the cache. (An error here
  // belongs to the request being replaced and is dropped with it.)
  m.take_all_done().IgnoreError();
  m.abandon();
  m.req = r;
  m.left = r.work.size();
  m.st.requests += r.work.size();
  // Hits complete first (no I/O); reads in flight are joined; the rest are
  // read in disk order.
  for (size_t i = 0; i < r.work.size(); ++i) {
    const int64_t key = m.key_of(r.layer, r.work[i].expert);
    if (const std::optional<uint32_t> found =
            m.cache->find(static_cast<int32_t>(r.layer), static_cast<int32_t>(r.work[i].expert))) {
      // Resident and idle: nothing else holds bytes once the held slot and
      // the replaced request's ready slots are released.
      const size_t slot = *found;
      ++m.st.hits;
      if (m.slots[slot].spec_unused) {
        m.slots[slot].spec_unused = false;
        ++m.st.speculative_hits;
      }
      m.slots[slot].busy = true;
      m.ready.push_back({i, slot});
      continue;
    }
    if (m.reading.count(key)) {
      m.waiting[key] = i;
      continue;
    }
    m.misses.push_back(i);
  }
  std::sort(m.misses.begin(), m.misses.end(), [&](size_t a, size_t b) {
    const checkpoint::ExpertLocation& la = m.index->at(r.layer, r.work[a].expert);
    const checkpoint::ExpertLocation& lb = m.index->at(r.layer, r.work[b].expert);
    return la.file != lb.file ? la.file < lb.file : la.offset < lb.offset;
  });
  m.dispatch();
  return absl::OkStatus();
}

StatusOr<std::optional<experts::ExpertCompletion>> PreadExpertSource::poll(int timeout_ms) {
  Impl& m = *impl_;
  m.release_held();
  if (m.left == 0) return absl::FailedPreconditionError("no expert completion is due");
  const auto deadline = Clock::now() + std::chrono::milliseconds(std::max(timeout_ms, 0));
  while (m.ready.empty()) {
    if (Status s = m.take_all_done(); !s.ok()) {
      m.abandon();
      return s;
    }
    m.dispatch();
    if (!m.ready.empty()) break;
    if (timeout_ms == 0 || (timeout_ms > 0 && Clock::now() >= deadline))
      return std::optional<experts::ExpertCompletion>();
    const auto t0 = Clock::now();
    {
      std::unique_lock<std::mutex> lock(m.mu);
      if (timeout_ms < 0)
        m.done_cv.wait(lock, [&] { return !m.done.empty(); });
      else
        m.done_cv.wait_until(lock, deadline, [&] { return !m.done.empty(); });
    }
    m.st.wait_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
  }
  const auto [idx, slot] = m.ready.front();
  m.ready.pop_front();
  --m.left;
  bool keep = false;
  experts::ExpertCompletion c = experts::complete_locally(
      m.shape, m.req, idx, m.slots[slot].buf.get() + m.slots[slot].data_offset, &m.st, &keep);
  if (keep)
    m.held = slot;
  else
    m.slots[slot].busy = false;
  return std::optional<experts::ExpertCompletion>(std::move(c));
}

}  // namespace k3::engined
