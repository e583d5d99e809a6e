// The checks every expert read from storage gets before anyone computes on
// it, for every reader (expertd's segment server, engined's in-process
// reader): no NaN (0xFF) MXFP4 scale, and with a manifest, the XXH3-128 of
// the expert's bytes equal to its entry. Every read is checked, not only
// the first: a refused expert is not cached, so a byte that rots on the
// drive is caught each time it is read.
//
// Thread-safe (pure; the hash runs on the caller's thread, outside any lock).
#pragma once

#include <cstdint>
#include <string>

#include "shared/checkpoint/expert_index.h"
#include "shared/checkpoint/manifest.h"
#include "shared/status.h"

namespace k3::experts {

// What the checks of one read found.
struct ReadVerdict {
  // OK, or DATA_LOSS naming the expert (and, for the manifest, the shard,
  // the offset and both hashes).
  Status status;
  bool nan_scales = false;  // refused for NaN scales
  bool verified = false;    // hashed against the manifest
  bool mismatch = false;    // ... and refused
  double verify_seconds = 0;
};

// Checks expert `expert` of `layer`, whose `expert_bytes` bytes start at
// `bytes`; `where` says where they came from, for the message ("shard F at
// offset N", "from remote expertd H"); `manifest` may be null (no hash).
ReadVerdict verify_expert_bytes(const checkpoint::ExpertLayout& layout, uint64_t expert_bytes,
                                const std::string& where, const checkpoint::Manifest* manifest,
                                int64_t layer, int64_t expert, const uint8_t* bytes);

// Checks expert `expert` of `layer`, whose bytes (`index.layout()`, read
// from `shard`, the file its location names) start at `bytes`; `manifest`
// may be null (no hash).
ReadVerdict verify_expert_read(const checkpoint::ExpertIndex& index, const std::string& shard,
                               const checkpoint::Manifest* manifest, int64_t layer, int64_t expert,
                               const uint8_t* bytes);

}  // namespace k3::experts
