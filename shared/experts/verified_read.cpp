#include "shared/experts/verified_read.h"

#include <chrono>

#include "shared/base/hash.h"

namespace k3::experts {

ReadVerdict verify_expert_read(const checkpoint::ExpertIndex& index, const std::string& shard,
                               const checkpoint::Manifest* manifest, int64_t layer, int64_t expert,
                               const uint8_t* bytes) {
  return verify_expert_bytes(index.layout(), index.expert_bytes(),
                             cat(shard, " at offset ", index.at(layer, expert).offset), manifest,
                             layer, expert, bytes);
}

ReadVerdict verify_expert_bytes(const checkpoint::ExpertLayout& layout, uint64_t expert_bytes,
                                const std::string& where, const checkpoint::Manifest* manifest,
                                int64_t layer, int64_t expert, const uint8_t* bytes) {
  ReadVerdict v;
  v.status = checkpoint::check_expert_scales(layout, bytes, layer, expert);
  if (!v.status.ok()) {
    v.nan_scales = true;
    return v;
  }
  if (manifest == nullptr) return v;
  const auto t0 = std::chrono::steady_clock::now();
  const base::Hash128 h = base::xxh3_128(bytes, expert_bytes);
  v.verify_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  v.verified = true;
  const checkpoint::ManifestEntry* want = manifest->expert(layer, expert);
  if (want != nullptr && want->hash == h) return v;
  v.mismatch = true;
  v.status = absl::DataLossError(
      cat("expert ", expert, " of layer ", layer, " (", where, ") fails the manifest check: ",
          want == nullptr ? std::string("not in the manifest")
                          : cat("xxh3-128 ", h.hex(), ", the manifest has ", want->hash.hex())));
  return v;
}

}  // namespace k3::experts
