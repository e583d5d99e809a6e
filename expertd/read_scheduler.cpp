#include "expertd/read_scheduler.h"

#include <algorithm>
#include <cstring>

#include "shared/base/log.h"
#include "shared/shm/read_span.h"

namespace k3::expertd {

using k3::checkpoint::ExpertLocation;

ReadScheduler::ReadScheduler(const ShardSet& shards, UringReader& reader, uint8_t* segment_base,
                             const ReadSchedulerOptions& opt)
    : shards_(shards), reader_(reader), base_(segment_base), opt_(opt) {}

int64_t ReadScheduler::key(int32_t layer, int32_t expert) const {
  return static_cast<int64_t>(layer) * shards_.config().num_experts + expert;
}

uint64_t ReadScheduler::start(uint32_t slot, int32_t layer, int32_t expert, uint64_t slot_offset,
                              bool speculative) {
  const ExpertLocation& loc = shards_.index().at(layer, expert);
  const shm::ReadSpan span =
      shm::expert_read_span(loc.offset, shards_.index().expert_bytes(), opt_.direct);
  ExpertRead rd;
  rd.slot = slot;
  rd.layer = layer;
  rd.expert = expert;
  rd.file = loc.file;
  rd.file_offset = span.file_offset;
  rd.length = span.length;
  rd.needed = span.needed;
  rd.lead = span.lead;
  rd.dst = slot_offset;
  rd.started = Clock::now();
  rd.speculative = rd.was_speculative = speculative;
  const uint64_t id = next_read_id_++;
  reads_.emplace(id, std::move(rd));
  reading_[key(layer, expert)] = id;
  (speculative ? speculative_queue_ : demand_queue_).push_back(id);
  spec_active_ += speculative;
  return id;
}

std::optional<uint64_t> ReadScheduler::reading(int32_t layer, int32_t expert) const {
  auto it = reading_.find(key(layer, expert));
  if (it == reading_.end()) return std::nullopt;
  return it->second;
}

void ReadScheduler::promote(uint64_t id) {
  ExpertRead& rd = reads_.at(id);
  rd.speculative = false;
  --spec_active_;
  auto it = std::find(speculative_queue_.begin(), speculative_queue_.end(), id);
  if (it != speculative_queue_.end()) {
    speculative_queue_.erase(it);
    demand_queue_.push_back(id);
  }
}

bool ReadScheduler::take_read_budget(uint64_t len) {
  if (!(opt_.read_limit_mbps > 0)) return true;
  const auto now = Clock::now();
  const double rate = opt_.read_limit_mbps * 1e6;  // bytes per second
  // At most 10 ms of reads (or one chunk) accrue while idle.
  const double burst = std::max(rate * 0.01, static_cast<double>(opt_.read_chunk_bytes));
  bucket_ =
      std::min(burst, bucket_ + std::chrono::duration<double>(now - bucket_time_).count() * rate);
  bucket_time_ = now;
  if (bucket_ < 0) {
    if (!throttled_.exchange(true)) {
      throttled_since_ = now;
      ++st_.read_limit_waits;
    }
    return false;
  }
  if (throttled_.exchange(false))
    st_.read_limit_wait_seconds += std::chrono::duration<double>(now - throttled_since_).count();
  bucket_ -= static_cast<double>(len);
  return true;
}

void ReadScheduler::submit() {
  if (in_flight_ >= opt_.queue_depth) return;
  int queued = submit_from(demand_queue_);
  // Speculative chunks only when no demand chunk waits.
  if (demand_queue_.empty()) queued += submit_from(speculative_queue_);
  if (queued > 0) reader_.submit();
}

int ReadScheduler::submit_from(std::deque<uint64_t>& q) {
  if (q.empty() || in_flight_ >= opt_.queue_depth) return 0;
  // Disk order across the queued reads (file, offset).
  std::stable_sort(q.begin(), q.end(), [&](uint64_t a, uint64_t b) {
    const ExpertRead& ra = reads_.at(a);
    const ExpertRead& rb = reads_.at(b);
    return ra.file != rb.file ? ra.file < rb.file : ra.file_offset < rb.file_offset;
  });
  int queued = 0;
  while (!q.empty() && in_flight_ < opt_.queue_depth) {
    const uint64_t id = q.front();
    ExpertRead& rd = reads_.at(id);
    const uint64_t off = rd.next_chunk;
    const uint64_t len = std::min(opt_.read_chunk_bytes, rd.length - off);
    if (!take_read_budget(len)) break;  // the completion loop retries shortly
    const uint64_t chunk_id = next_chunk_id_++;
    if (!reader_.queue(rd.file, rd.file_offset + off, base_ + rd.dst + off,
                       static_cast<uint32_t>(len), chunk_id))
      break;
    chunks_.emplace(chunk_id, Chunk{id, off, len});
    rd.next_chunk += len;
    ++rd.chunks_in_flight;
    if (in_flight_ == 0) busy_since_ = Clock::now();
    ++in_flight_;
    ++queued;
    if (rd.next_chunk >= rd.length) q.pop_front();
  }
  return queued;
}

void ReadScheduler::drain(std::vector<uint64_t>* done) {
  reader_.drain([&](uint64_t chunk_id, int res) {
    auto ck = chunks_.find(chunk_id);
    if (ck == chunks_.end()) return;
    const Chunk c = ck->second;
    chunks_.erase(ck);
    ExpertRead& rd = reads_.at(c.read_id);
    // Bytes of this chunk that must arrive: the tail of an O_DIRECT read may
    // run past the end of the file.
    const uint64_t need = c.offset >= rd.needed ? 0 : std::min(c.len, rd.needed - c.offset);
    if (res < 0 || static_cast<uint64_t>(res) < need) {
      // The first failed chunk of a read names the shard and the range.
      if (!rd.failed)
        base::logger("expertd")->error(
            "read of expert {} of layer {} failed: {} at offset {} ({} bytes, the expert at "
            "offset {}): {}",
            rd.expert, rd.layer, shards_.checkpoint().files()[rd.file], rd.file_offset + c.offset,
            c.len, shards_.index().at(rd.layer, rd.expert).offset,
            res < 0 ? std::string(std::strerror(-res))
                    : cat("short read (", res, " of ", need, " bytes)"));
      rd.failed = true;
      ++st_.io_errors;
    }
    --rd.chunks_in_flight;
    --in_flight_;
    if (in_flight_ == 0)
      st_.read_seconds += std::chrono::duration<double>(Clock::now() - busy_since_).count();
    if (rd.chunks_in_flight == 0 && rd.next_chunk >= rd.length) done->push_back(c.read_id);
  });
}

ExpertRead ReadScheduler::finish(uint64_t id) {
  ExpertRead rd = std::move(reads_.at(id));
  reads_.erase(id);
  reading_.erase(key(rd.layer, rd.expert));
  if (rd.speculative) --spec_active_;
  return rd;
}

}  // namespace k3::expertd
