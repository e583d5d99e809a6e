// ExpertSource over one or more local expertd shared-memory segments.
//
// Each expert goes to the first attached segment that serves it (the
// placement: which instance serves which experts, read from the segments'
// served bitmaps). fetch() posts every expert of a layer as soon as routing is
// known, computes on each as its completion arrives and releases the lease
// right after. If an expertd dies or restarts mid-request, the request fails
// with UNAVAILABLE; the next fetch() reattaches when it is back. Bytes are
// verified (slot state, layer, expert, generation, segment epoch) before and
// after use: the engine never computes on stale bytes.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engined/expert_source.h"
#include "shared/base/status.h"

namespace k3::engine {

struct ShmSourceOptions {
  std::vector<std::string> segments;  // /dev/shm names, e.g. "k3serve-expertd"
  uint64_t fingerprint = 0;           // the model's Checkpoint::fingerprint()
  uint64_t expert_bytes = 0;
  int64_t num_experts = 0;
  int liveness_ms = 100;  // how often a waiting fetch checks that expertd lives
};

class ShmExpertSource final : public ExpertSource {
 public:
  static StatusOr<std::unique_ptr<ShmExpertSource>> create(const ShmSourceOptions& opt);
  ~ShmExpertSource() override;  // releases its client areas
  Status fetch(int64_t layer, const std::vector<int64_t>& ids,
               const ExpertReadyFn& on_ready) override;
  // Asks the segments to read these experts ahead (no lease, no completion).
  Status prefetch(int64_t layer, const std::vector<int64_t>& ids);
  ExpertSourceStats stats() const override;

 private:
  struct Impl;
  explicit ShmExpertSource(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3::engine
