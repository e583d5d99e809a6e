// ExpertSource reading the shards in-process: a byte-budgeted LRU of expert
// slots, loader threads issuing one read per expert (the six tensors are
// contiguous) in disk-offset order, O_DIRECT where the filesystem allows it.
#pragma once

#include <memory>

#include "engined/expert_source.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/expert_index.h"

namespace k3::engine {

struct PreadSourceOptions {
  uint64_t cache_bytes = 1ull << 30;  // LRU budget (at least one slot is kept)
  int threads = 4;                    // loader threads
  bool direct = true;                 // O_DIRECT (falls back to buffered where refused)
};

class PreadExpertSource final : public ExpertSource {
 public:
  // `ck` and `index` must outlive the source.
  static StatusOr<std::unique_ptr<PreadExpertSource>> create(const Checkpoint& ck,
                                                             const ExpertIndex& index,
                                                             const PreadSourceOptions& opt);
  ~PreadExpertSource() override;
  Status fetch(int64_t layer, const std::vector<int64_t>& ids,
               const ExpertReadyFn& on_ready) override;
  ExpertSourceStats stats() const override;
  // True when reads use O_DIRECT.
  bool direct() const;

 private:
  struct Impl;
  explicit PreadExpertSource(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3::engine
