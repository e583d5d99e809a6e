// Where the engine gets routed-expert bytes from. The in-process source reads
// the shards directly (pread_expert_source.h); the expertd issue adds a
// shared-memory source.
#pragma once

#include <cstdint>
#include <functional>
#include <vector>

#include "shared/base/status.h"

namespace k3::engine {

struct ExpertSourceStats {
  uint64_t requests = 0;    // experts asked for
  uint64_t hits = 0;        // served from the cache
  uint64_t reads = 0;       // experts read from storage
  uint64_t bytes_read = 0;  // bytes read from storage
  double wait_seconds = 0;  // time fetch() spent waiting for bytes (unhidden I/O)
};

// Called with the index i into the requested ids and the expert's bytes, laid
// out as ExpertIndex::layout() describes; the bytes stay valid until it returns.
using ExpertReadyFn = std::function<Status(size_t i, const uint8_t* data)>;

// Not thread-safe: one caller at a time.
class ExpertSource {
 public:
  virtual ~ExpertSource() = default;
  // Makes experts `ids` (distinct) of `layer` available and calls `on_ready`
  // once per id, on the calling thread, in the order the bytes arrive, so
  // computing on one expert overlaps reading the next. Stops at the first error
  // (its own or on_ready's) and returns it.
  virtual Status fetch(int64_t layer, const std::vector<int64_t>& ids,
                       const ExpertReadyFn& on_ready) = 0;
  virtual ExpertSourceStats stats() const = 0;
};

}  // namespace k3::engine
