// Saved sequence states: turn-boundary checkpoints and prefill snapshots (a
// state every --snapshot-tokens prompt tokens). When a new prompt diverges
// from what a session processed (an edited message, a regenerated reply, the
// same long document under another question), engined restores the deepest
// saved state whose tokens are a prefix of the prompt instead of prefilling
// from token 0. KDA states cannot be rewound, so a copy is the only way back.
//
// Two tiers, each within its own budget, least recently used evicted first:
//  - RAM (budget_bytes, --checkpoint-mb): a save is copied here at once, so
//    the next request sees it;
//  - a directory (dir, disk_budget_bytes: --checkpoint-dir,
//    --checkpoint-disk-gb): every save is also queued for a file
//    (snapshot_file.h), written by a thread of its own (disk_write_queue.h);
//    a full queue drops the write (counted) and never stalls the caller. An
//    entry evicted from RAM that has no file yet is queued then. Until its
//    file is written an entry stays restorable from the queued copy.
// Files survive restarts: open() indexes the directory's valid files of this
// model, dense bits and expert top-p (files of another model are left alone:
// a directory may be shared by engined processes; corrupt ones are removed).
// A file that vanishes (another process evicted it) is a miss; one that
// fails its checks is refused, logged and dropped, and the prompt is
// prefilled. The disk's free space bounds the directory too: a write evicts
// the least recently used files until it fits.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engined/model/state.h"
#include "engined/serving/disk_write_queue.h"
#include "engined/serving/snapshot_file.h"
#include "shared/checkpoint/model_config.h"
#include "shared/status.h"

namespace k3::engined {

struct CheckpointOptions {
  uint64_t budget_bytes = 0;       // RAM tier (0: none)
  std::string dir;                 // empty: no disk tier
  uint64_t disk_budget_bytes = 0;  // disk tier, with dir (0: none)
  // Writes waiting for the disk at most (each holds a copy of its state).
  size_t write_queue = 2;
};

// Not thread-safe: engined's engine loop owns it (its disk writer is its
// own thread; wait_writes() may be called from any thread).
class CheckpointStore {
 public:
  // Opens the store. A directory is created if missing and indexed: valid
  // snapshot files of this model (fingerprint, dense bits) are kept, least
  // recently modified evicted first beyond the disk budget; corrupt ones and
  // files of the older checkpoint format (ckpt-*.k3s) are removed, as are
  // temporaries older than an hour (a crashed writer's).
  static StatusOr<std::unique_ptr<CheckpointStore>> open(const CheckpointOptions& opt,
                                                         const checkpoint::ModelConfig& config,
                                                         uint64_t fingerprint, int dense_bits);
  // Finishes the queued writes (files outlive the process).
  ~CheckpointStore();

  bool enabled() const { return opt_.budget_bytes > 0 || disk_enabled(); }
  bool disk_enabled() const { return !opt_.dir.empty() && opt_.disk_budget_bytes > 0; }
  // Entries are keyed on the tokens and the expert top-p the state was
  // computed under (EngineOptions::expert_top_p): a request never gets a
  // state computed with other experts.
  //
  // Whether a state of exactly these tokens is held (in either tier).
  bool has(const std::vector<int32_t>& tokens, int64_t n, float expert_top_p = 1.0f);
  // Saves the state after tokens[0, n) with its last logits: into RAM when it
  // fits the RAM budget, and queued for the disk. A state larger than both
  // budgets is skipped (returns OK). A state kept nowhere (no RAM tier, and
  // no room on the disk or in its write queue) fails; so does a write the
  // disk refuses later. Failures are counted and logged at most once a
  // minute, with their count; a write dropped for a full queue is counted in
  // writes_dropped() (a failure only when RAM has no copy either).
  Status save(const std::vector<int32_t>& tokens, int64_t n, const SequenceState& state,
              const std::vector<float>& logits, float expert_top_p = 1.0f);
  // The deepest saved state whose tokens are a prefix of `prompt` and longer
  // than `min_tokens`, from either tier; tokens == 0 in the result when there
  // is none. A file that cannot be read back is dropped (logged) and the next
  // deepest tried.
  RestoredState restore_deepest(const std::vector<int32_t>& prompt, int64_t min_tokens,
                                float expert_top_p = 1.0f);
  // Waits until the queued disk writes are done (tests; shutdown). Thread-safe.
  void wait_writes() {
    if (writer_) writer_->wait_idle();
  }

  uint64_t bytes() const { return ram_bytes_; }        // the RAM tier's
  uint64_t disk_bytes() const { return disk_bytes_; }  // files written or being written
  size_t size() const { return entries_.size(); }
  // Saves that failed, and files evicted to make room on the disk.
  uint64_t failed_saves() const { return failed_saves_; }
  uint64_t evicted_for_space() const { return evicted_for_space_; }
  // Evictions from either tier (the budget or the disk), oldest use first.
  uint64_t evictions() const { return evictions_; }
  // Disk writes dropped because the write queue was full.
  uint64_t writes_dropped() const { return writer_ ? writer_->dropped() : 0; }
  // Files refused on reading (corrupt, truncated, of another model).
  uint64_t files_refused() const { return files_refused_; }

 private:
  struct Entry;
  struct Stored;
  CheckpointStore(const CheckpointOptions& opt, const checkpoint::ModelConfig& config,
                  uint64_t fingerprint, int dense_bits);
  Status index_dir();
  SnapshotIdentity identity(float expert_top_p) const {
    return {fingerprint_, dense_bits_, expert_top_p};
  }
  Entry* find(const std::vector<int32_t>& tokens, int64_t n, float expert_top_p);
  // The outcomes of finished writes into the index.
  void drain_writes();
  // Queues `e`'s file (it holds `data`); false when not queued.
  bool queue_write(Entry& e, std::shared_ptr<const Stored> data);
  void evict_ram_until(uint64_t need);
  void evict_disk_until(uint64_t need);
  void drop_file(Entry& e);
  void erase_if_empty(Entry* e);
  // Free bytes on the directory's filesystem (max when unknown).
  uint64_t free_space() const;
  void warn_failed(const Status& s);

  CheckpointOptions opt_;
  checkpoint::ModelConfig config_;
  uint64_t fingerprint_;
  int dense_bits_;
  std::vector<std::unique_ptr<Entry>> entries_;
  uint64_t ram_bytes_ = 0, disk_bytes_ = 0;
  uint64_t clock_ = 0;
  uint64_t next_tag_ = 0;
  uint64_t failed_saves_ = 0, evicted_for_space_ = 0, evictions_ = 0, files_refused_ = 0;
  uint64_t failures_since_warning_ = 0;
  std::chrono::steady_clock::time_point last_warning_{};
  std::unique_ptr<DiskWriteQueue> writer_;  // with a disk tier; last: stops first
};

}  // namespace k3::engined
