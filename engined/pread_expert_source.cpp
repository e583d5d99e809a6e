#include "engined/pread_expert_source.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <list>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "shared/base/log.h"
#include "shared/shm/read_span.h"

namespace k3::engine {
namespace {

constexpr uint64_t kAlign = 4096;

struct AlignedFree {
  void operator()(uint8_t* p) const { std::free(p); }
};

struct Slot {
  std::unique_ptr<uint8_t, AlignedFree> buf;
  uint64_t data_offset = 0;  // where the expert starts inside buf
  int64_t key = -1;          // layer * E + expert, -1 when empty
  bool busy = false;         // a read is in flight or its bytes are not consumed yet
};

struct Job {
  size_t slot = 0;
  size_t request_index = 0;
  int64_t layer = 0, expert = 0;
};

struct Done {
  Job job;
  Status status;
};

}  // namespace

struct PreadExpertSource::Impl {
  const Checkpoint* ck = nullptr;
  const ExpertIndex* index = nullptr;
  PreadSourceOptions opt;
  std::vector<int> direct_fds;  // per shard, -1 when O_DIRECT is unavailable
  bool direct = false;
  uint64_t slot_bytes = 0;
  std::vector<Slot> slots;
  std::list<size_t> lru;  // front = most recently used; holds slots with a key
  std::unordered_map<int64_t, std::list<size_t>::iterator> where;  // key -> lru position
  ExpertSourceStats stats;

  std::mutex mu;
  std::condition_variable job_cv, done_cv;
  std::deque<Job> jobs;
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

  // Reads one expert into its slot (runs on a loader thread).
  Status read(const Job& j, Slot& slot) {
    const ExpertLocation& loc = index->at(j.layer, j.expert);
    const uint64_t len = index->expert_bytes();
    uint8_t* buf = slot.buf.get();
    if (loc.contiguous && direct_fds[loc.file] >= 0) {
      const shm::ReadSpan span = shm::expert_read_span(loc.offset, len, /*direct=*/true);
      const uint64_t start = span.file_offset;
      uint64_t done_bytes = 0;
      while (done_bytes < span.length) {
        ssize_t r = ::pread(direct_fds[loc.file], buf + done_bytes, span.length - done_bytes,
                            static_cast<off_t>(start + done_bytes));
        if (r < 0 && errno == EINTR) continue;
        if (r < 0)
          return absl::DataLossError(cat(ck->files()[loc.file], ": O_DIRECT read at ", start,
                                         " failed: ", std::strerror(errno)));
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
    const ExpertLayout& lay = index->layout();
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
        job_cv.wait(lock, [&] { return stopping || !jobs.empty(); });
        if (stopping) return;
        j = jobs.front();
        jobs.pop_front();
      }
      Status s = read(j, slots[j.slot]);
      {
        std::lock_guard<std::mutex> lock(mu);
        done.push_back({j, std::move(s)});
      }
      done_cv.notify_one();
    }
  }

  void touch(size_t slot) {
    auto it = where.find(slots[slot].key);
    lru.splice(lru.begin(), lru, it->second);
  }

  // A slot to read into: an empty one, else the least recently used idle one.
  bool take_slot(size_t* out) {
    for (size_t i = 0; i < slots.size(); ++i)
      if (slots[i].key < 0 && !slots[i].busy) {
        *out = i;
        return true;
      }
    for (auto it = lru.rbegin(); it != lru.rend(); ++it) {
      if (!slots[*it].busy) {
        *out = *it;
        where.erase(slots[*it].key);
        lru.erase(std::next(it).base());
        slots[*out].key = -1;
        return true;
      }
    }
    return false;
  }
};

PreadExpertSource::PreadExpertSource(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
PreadExpertSource::~PreadExpertSource() = default;

StatusOr<std::unique_ptr<PreadExpertSource>> PreadExpertSource::create(
    const Checkpoint& ck, const ExpertIndex& index, const PreadSourceOptions& opt) {
  auto impl = std::make_unique<Impl>();
  impl->ck = &ck;
  impl->index = &index;
  impl->opt = opt;
  impl->slot_bytes = shm::expert_slot_stride(index.expert_bytes());
  const int threads = std::clamp(opt.threads, 1, 64);
  size_t nslots = static_cast<size_t>(opt.cache_bytes / impl->slot_bytes);
  nslots = std::max<size_t>(nslots, static_cast<size_t>(threads) + 1);
  impl->slots.resize(nslots);
  for (auto& s : impl->slots) {
    void* p = nullptr;
    if (posix_memalign(&p, kAlign, impl->slot_bytes) != 0)
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
      logger("engined")->warn("O_DIRECT refused for {} of {} shards (tmpfs?): buffered reads there",
                              ck.files().size() - opened, ck.files().size());
  }
  for (int i = 0; i < threads; ++i) impl->threads.emplace_back([p = impl.get()] { p->loader(); });
  return std::unique_ptr<PreadExpertSource>(new PreadExpertSource(std::move(impl)));
}

bool PreadExpertSource::direct() const {
  return impl_->direct;
}

ExpertSourceStats PreadExpertSource::stats() const {
  return impl_->stats;
}

Status PreadExpertSource::fetch(int64_t layer, const std::vector<int64_t>& ids,
                                const ExpertReadyFn& on_ready) {
  Impl& m = *impl_;
  const int64_t E = m.index->num_experts();
  m.stats.requests += ids.size();
  // Hits first (no I/O), then the misses in disk order.
  std::vector<size_t> misses;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int64_t key = layer * E + ids[i];
    auto it = m.where.find(key);
    if (it == m.where.end()) {
      misses.push_back(i);
      continue;
    }
    const size_t slot = *it->second;
    m.touch(slot);
    ++m.stats.hits;
    m.slots[slot].busy = true;
    Status s = on_ready(i, m.slots[slot].buf.get() + m.slots[slot].data_offset);
    m.slots[slot].busy = false;
    K3_RETURN_IF_ERROR(s);
  }
  std::sort(misses.begin(), misses.end(), [&](size_t a, size_t b) {
    const ExpertLocation& la = m.index->at(layer, ids[a]);
    const ExpertLocation& lb = m.index->at(layer, ids[b]);
    return la.file != lb.file ? la.file < lb.file : la.offset < lb.offset;
  });
  size_t next = 0, in_flight = 0;
  Status result;
  while (next < misses.size() || in_flight > 0) {
    // Keep every loader busy while slots allow.
    while (result.ok() && next < misses.size()) {
      size_t slot;
      if (!m.take_slot(&slot)) break;
      m.slots[slot].busy = true;
      {
        std::lock_guard<std::mutex> lock(m.mu);
        m.jobs.push_back({slot, misses[next], layer, ids[misses[next]]});
      }
      m.job_cv.notify_one();
      ++next;
      ++in_flight;
    }
    if (in_flight == 0) break;
    Done d;
    {
      const auto t0 = std::chrono::steady_clock::now();
      std::unique_lock<std::mutex> lock(m.mu);
      m.done_cv.wait(lock, [&] { return !m.done.empty(); });
      d = std::move(m.done.front());
      m.done.pop_front();
      m.stats.wait_seconds +=
          std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    --in_flight;
    Slot& slot = m.slots[d.job.slot];
    if (d.status.ok() && result.ok()) {
      ++m.stats.reads;
      m.stats.bytes_read += m.index->expert_bytes();
      slot.key = layer * E + d.job.expert;
      m.lru.push_front(d.job.slot);
      m.where[slot.key] = m.lru.begin();
      result = on_ready(d.job.request_index, slot.buf.get() + slot.data_offset);
    } else if (result.ok()) {
      result = d.status;
    }
    slot.busy = false;
  }
  return result;
}

}  // namespace k3::engine
