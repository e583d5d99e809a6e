// Builds the expert source an engine process is configured for: the shards
// read in-process (no segments named), one expertd segment, or a placement
// over several. Called by serving/, main and the CLI jobs, never by the model.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engined/experts/expert_source.h"
#include "engined/model/model.h"

namespace k3::engine {

struct ExpertSourceOptions {
  // expertd shared-memory segments to take experts from, in order of
  // preference; empty: read the shards in-process.
  std::vector<std::string> expertd_segments;
  // The in-process reader.
  uint64_t cache_bytes = 1ull << 30;
  int loader_threads = 4;
  bool direct_io = true;
  // --manifest: the in-process reader checks every expert read against it
  // (an expertd checks its own reads with its own --manifest).
  std::shared_ptr<const Manifest> manifest;
};

// For `model`: the in-process reader opens the model's expert shards
// itself; with expertd segments no shard is opened (experts come only from
// the segments).
StatusOr<std::unique_ptr<ExpertSource>> make_expert_source(const ExpertSourceOptions& opt,
                                                           const Model& model);

}  // namespace k3::engine
