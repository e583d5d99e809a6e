// Saved sequence states at turn boundaries: when a conversation's new prompt
// diverges from what a session processed (an edited message, a regenerated
// reply), engined restores the deepest saved state whose tokens are a prefix of
// the prompt instead of prefilling from token 0. KDA states cannot be rewound,
// so a copy is the only way back.
//
// Entries live in RAM, or in files under a directory (then RAM holds only their
// tokens); either way within a byte budget, least recently used evicted first.
// In a directory the disk's free space bounds them too: a save evicts the
// least recently used files until the new one fits on the filesystem (and
// again if the write still runs out of space), so a full disk costs old
// checkpoints, not new ones.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engined/model/state.h"
#include "shared/checkpoint/model_config.h"
#include "shared/status.h"

namespace k3::engined {

struct CheckpointOptions {
  uint64_t budget_bytes = 0;  // 0: no checkpoints
  std::string dir;            // empty: in RAM
};

// A restored state: the sequence after `tokens` and the logits of its last
// position [vocab].
struct RestoredState {
  std::unique_ptr<SequenceState> state;
  std::vector<float> logits;
  int64_t tokens = 0;
};

// Not thread-safe: engined's engine loop owns it.
class CheckpointStore {
 public:
  // Opens the store; a directory is created if missing, and checkpoint files
  // of an earlier run (ckpt-*.k3s and ckpt-*.k3s.tmp, only those) are
  // removed from it.
  static StatusOr<std::unique_ptr<CheckpointStore>> open(const CheckpointOptions& opt,
                                                         const checkpoint::ModelConfig& config,
                                                         uint64_t fingerprint);
  ~CheckpointStore();

  bool enabled() const { return opt_.budget_bytes > 0; }
  // Entries are keyed on the tokens and the expert top-p the state was
  // computed under (EngineOptions::expert_top_p): a request never gets a
  // state computed with other experts.
  //
  // Whether a checkpoint of exactly these tokens is held.
  bool has(const std::vector<int32_t>& tokens, int64_t n, float expert_top_p = 1.0f) const;
  // Saves the state after tokens[0, n) with its last logits. A state larger
  // than the budget is skipped (returns OK); older entries are evicted. A save
  // that fails anyway is logged at most once a minute, with the count of
  // failures since the last warning, and returned.
  Status save(const std::vector<int32_t>& tokens, int64_t n, const SequenceState& state,
              const std::vector<float>& logits, float expert_top_p = 1.0f);
  // The deepest checkpoint whose tokens are a prefix of `prompt` and longer
  // than `min_tokens`; tokens == 0 in the result when there is none. A file
  // that cannot be read back is dropped and reported as none (logged).
  RestoredState restore_deepest(const std::vector<int32_t>& prompt, int64_t min_tokens,
                                float expert_top_p = 1.0f);

  uint64_t bytes() const { return bytes_; }
  size_t size() const { return entries_.size(); }
  // Saves that failed, and entries evicted to make room on the disk.
  uint64_t failed_saves() const { return failed_saves_; }
  uint64_t evicted_for_space() const { return evicted_for_space_; }
  // Entries evicted for any reason (the budget or the disk), oldest use first.
  uint64_t evictions() const { return evictions_; }

 private:
  struct Entry;
  CheckpointStore(const CheckpointOptions& opt, const checkpoint::ModelConfig& config,
                  uint64_t fingerprint);
  void evict_until(uint64_t need);
  void evict_lru();
  // Free bytes on the directory's filesystem (max when unknown).
  uint64_t free_space() const;
  Status save_file(Entry& e, const SequenceState& state, const std::vector<float>& logits);
  void warn_failed(const Status& s);
  Status write_file(const Entry& e, const SequenceState& state, const std::vector<float>& logits);
  StatusOr<RestoredState> read_file(const Entry& e) const;

  CheckpointOptions opt_;
  checkpoint::ModelConfig config_;
  uint64_t fingerprint_;
  std::vector<std::unique_ptr<Entry>> entries_;
  uint64_t bytes_ = 0;
  uint64_t clock_ = 0;
  uint64_t next_file_ = 0;
  uint64_t failed_saves_ = 0, evicted_for_space_ = 0, evictions_ = 0;
  uint64_t failures_since_warning_ = 0;
  std::chrono::steady_clock::time_point last_warning_{};
};

}  // namespace k3::engined
