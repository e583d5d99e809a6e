// expertd's drive reads: each expert is read into its slot of the segment
// in chunks queued on io_uring (uring_reader.h), demand reads ahead of
// speculative ones, each kind in disk order (file, offset), at most
// queue_depth chunks in flight, and with --read-limit-mbps a token bucket
// in front of submission (a benchmarking aid that makes reads the bound).
// A chunk that fails or comes back short fails its read; the segment server
// (segment_server.h) decides what a finished read means for its clients.
//
// Not thread-safe: the segment server calls it under its mutex, except
// wait() and throttled(), which it calls without.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <optional>
#include <unordered_map>
#include <vector>

#include "expertd/shard_set.h"
#include "expertd/uring_reader.h"

namespace k3::expertd {

struct ReadSchedulerOptions {
  int queue_depth = 64;                  // chunks in flight
  uint64_t read_chunk_bytes = 4u << 20;  // an expert read is split into chunks of this size
  double read_limit_mbps = 0;            // cap on drive reads, MB/s (10^6 bytes; 0 = none)
  bool direct = true;                    // the reader's files are O_DIRECT (aligned spans)
};

// One expert being read into one slot, in one or more chunks.
struct ExpertRead {
  uint32_t slot = 0;
  int32_t layer = 0, expert = 0;
  uint32_t file = 0;
  uint64_t file_offset = 0;  // 4 KiB aligned (O_DIRECT) or the expert's own offset
  uint64_t length = 0;       // bytes to read from file_offset
  uint64_t needed = 0;       // bytes that must arrive (to the expert's end)
  uint64_t lead = 0;         // the expert starts this far into the slot's buffer
  uint64_t dst = 0;          // segment offset the read lands at
  uint64_t next_chunk = 0;   // bytes already queued
  int chunks_in_flight = 0;
  bool failed = false;
  // Started by a prefetch and not yet joined by a demand request.
  bool speculative = false;
  bool was_speculative = false;  // started by a prefetch (joined or not)
  std::chrono::steady_clock::time_point started;
};

// The scheduler's own figures (the segment server's stats of the same names).
struct ReadSchedulerStats {
  uint64_t io_errors = 0;              // chunks that failed (errno) or came back short
  double read_seconds = 0;             // wall time with at least one chunk in flight
  uint64_t read_limit_waits = 0;       // times submission paused for the read limit
  double read_limit_wait_seconds = 0;  // time it stayed paused
};

class ReadScheduler {
 public:
  // Reads land in the segment at `segment_base`; `shards` and `reader`
  // must outlive the scheduler.
  ReadScheduler(const ShardSet& shards, UringReader& reader, uint8_t* segment_base,
                const ReadSchedulerOptions& opt);

  // Starts reading expert (layer, expert) into `slot`, whose buffer is at
  // segment offset `slot_offset`; returns the read's id. The expert's bytes
  // will start at slot_offset + read(id).lead.
  uint64_t start(uint32_t slot, int32_t layer, int32_t expert, uint64_t slot_offset,
                 bool speculative);
  // The read in flight of that expert.
  std::optional<uint64_t> reading(int32_t layer, int32_t expert) const;
  ExpertRead& read(uint64_t id) { return reads_.at(id); }
  // A demand request joined speculative read `id`: its chunks left go ahead
  // of every speculative one from now on.
  void promote(uint64_t id);
  // Speculative reads started and neither finished nor joined.
  int speculative_active() const { return spec_active_; }

  // Queues chunks up to the queue depth (demand ones first, speculative
  // ones only when no demand chunk waits) and hands them to the kernel.
  void submit();
  // Waits at most timeout_ms for a completion (without the caller's lock).
  bool wait(int timeout_ms) { return reader_.wait(timeout_ms); }
  // Whether submission is paused by the read limit (without the lock).
  bool throttled() const { return throttled_.load(); }
  // Takes in every completed chunk; appends the reads whose last chunk
  // arrived to `done` (their `failed` says whether every chunk came back).
  void drain(std::vector<uint64_t>* done);
  // Removes finished read `id` and returns it.
  ExpertRead finish(uint64_t id);

  int in_flight() const { return in_flight_; }
  const ReadSchedulerStats& stats() const { return st_; }

 private:
  using Clock = std::chrono::steady_clock;
  struct Chunk {
    uint64_t read_id;
    uint64_t offset;  // within the read
    uint64_t len;
  };
  int64_t key(int32_t layer, int32_t expert) const;
  // Whether a chunk of `len` bytes may be submitted now (taking its bytes).
  bool take_read_budget(uint64_t len);
  // Queues chunks of the reads in `q` up to the queue depth; returns how many.
  int submit_from(std::deque<uint64_t>& q);

  const ShardSet& shards_;
  UringReader& reader_;
  uint8_t* base_;
  ReadSchedulerOptions opt_;
  std::unordered_map<int64_t, uint64_t> reading_;   // key -> read id
  std::unordered_map<uint64_t, ExpertRead> reads_;  // read id -> read
  uint64_t next_read_id_ = 1;
  std::deque<uint64_t> demand_queue_;       // demand reads with chunks left
  std::deque<uint64_t> speculative_queue_;  // speculative reads with chunks left
  int spec_active_ = 0;
  std::unordered_map<uint64_t, Chunk> chunks_;  // chunk id (io_uring user data) -> chunk
  uint64_t next_chunk_id_ = 1;
  int in_flight_ = 0;
  Clock::time_point busy_since_;
  ReadSchedulerStats st_;
  // --read-limit-mbps: bytes that may be submitted now (negative: in debt
  // for a chunk larger than what had accrued), refilled at the limit.
  double bucket_ = 0;
  Clock::time_point bucket_time_ = Clock::now();
  std::atomic<bool> throttled_{false};
  Clock::time_point throttled_since_;
};

}  // namespace k3::expertd
