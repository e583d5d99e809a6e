// ExpertSource over one local expertd shared-memory segment (protocol:
// shared/shm/client_ring.h). submit() posts every expert of a layer as soon
// as routing is known; poll() hands each one out as its completion arrives,
// holding its lease (shared/shm/expert_lease.h) until the next call, or
// computing its rows on the leased bytes and releasing the lease at once.
// Bytes are verified (slot state, layer, expert, generation, segment epoch)
// before and after use: the engine never computes on stale bytes. If expertd
// dies or restarts mid-request, the request fails with UNAVAILABLE;
// prepare() reattaches when it is back. Speculative requests become
// expertd prefetches (read if missing, no lease, no completion).
#pragma once

#include <memory>
#include <string>

#include "shared/experts/expert_source.h"
#include "shared/status.h"

namespace k3::experts {

struct ShmSourceOptions {
  std::string segment;       // "k3serve-expertd" (/dev/shm) or DIR/NAME (shared/shm/segment.h)
  uint64_t fingerprint = 0;  // the model's Checkpoint::fingerprint()
  int liveness_ms = 100;     // how often a waiting poll checks that expertd lives
};

class ShmExpertSource final : public ExpertSource {
 public:
  // Attaches now; fails (UNAVAILABLE while expertd is not up) if it cannot.
  static StatusOr<std::unique_ptr<ShmExpertSource>> create(const ShmSourceOptions& opt,
                                                           const ExpertShape& shape);
  ~ShmExpertSource() override;  // releases its leases and client area
  Status submit(const ExpertRequest& request) override;
  StatusOr<std::optional<ExpertCompletion>> poll(int timeout_ms) override;
  size_t outstanding() const override;
  Status prepare() override;
  bool owns(int64_t layer, int64_t expert) const override;
  ExpertSourceStats stats() const override;
  bool reads_use_host_cores() const override;  // the attached expertd reads buffered

 private:
  struct Impl;
  explicit ShmExpertSource(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3::experts
