// ExpertSource reading the shards in-process: a byte-budgeted LRU of expert
// slots, loader threads issuing one read per expert (the six tensors are
// contiguous) in disk-offset order, O_DIRECT where the filesystem allows it.
// Demand reads go ahead of speculative ones; at most shm::kSpeculativeInFlight
// speculative reads run at once (as in expertd), so a demand read waits for
// at most that many reads already started. Slots are kept by the slot LRU
// (shared/experts/slot_lru.h) and every read is checked
// (shared/experts/verified_read.h), as expertd's are.
#pragma once

#include <memory>

#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/expert_index.h"
#include "shared/checkpoint/manifest.h"
#include "shared/experts/expert_source.h"

namespace k3::engined {

struct PreadSourceOptions {
  uint64_t cache_bytes = 1ull << 30;  // LRU budget (at least threads + 1 slots are kept)
  int threads = 4;                    // loader threads
  bool direct = true;                 // O_DIRECT (falls back to buffered where refused)
  // When set (engined --manifest), every expert read is hashed (XXH3-128 of
  // its slot bytes) and checked against it: a mismatch fails the request with
  // DATA_LOSS naming the shard, offset, layer and expert, is counted, and the
  // expert is not cached (the next request reads it again).
  std::shared_ptr<const checkpoint::Manifest> manifest;
};

class PreadExpertSource final : public experts::ExpertSource {
 public:
  // Opens the shards of DIR (+ extra dirs) holding routed experts and reads
  // them; every expert of the model must be there (FAILED_PRECONDITION
  // naming how many are and which shards are absent).
  static StatusOr<std::unique_ptr<PreadExpertSource>> open(
      const std::string& model_dir, const std::vector<std::string>& extra_dirs,
      const checkpoint::ModelConfig& config, const PreadSourceOptions& opt);
  // Over an opened checkpoint; `ck` and `index` must outlive the source.
  static StatusOr<std::unique_ptr<PreadExpertSource>> create(const checkpoint::Checkpoint& ck,
                                                             const checkpoint::ExpertIndex& index,
                                                             const experts::ExpertShape& shape,
                                                             const PreadSourceOptions& opt);
  ~PreadExpertSource() override;
  Status submit(const experts::ExpertRequest& request) override;
  StatusOr<std::optional<experts::ExpertCompletion>> poll(int timeout_ms) override;
  size_t outstanding() const override;
  bool owns(int64_t layer, int64_t expert) const override;
  experts::ExpertSourceStats stats() const override;
  // True when reads use O_DIRECT.
  bool direct() const;
  bool reads_use_host_cores() const override { return !direct(); }

 private:
  struct Impl;
  explicit PreadExpertSource(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3::engined
