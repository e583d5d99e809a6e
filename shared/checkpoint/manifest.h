// The integrity manifest of a checkpoint (`k3ctl manifest`): JSON lines, one
// XXH3-128 per tensor and per routed expert, keyed by logical name.
//
//   {"k3_manifest":2,"hash":"xxh3-128","model_fingerprint":"<16 hex>","entries":N}
//   {"tensor":"model.norm.weight","dtype":"BF16","shape":[7168],"bytes":14336,"xxh3_128":"<32
//   hex>"}
//   {"expert":"model.layers.3.block_sparse_moe.experts.7","layer":3,"id":7,"bytes":B,"xxh3_128":"..."}
//
// A tensor entry hashes the tensor's stored bytes, and says which format
// (dtype, shape) they are in, so a repacked container's dense entries differ
// from its source's by design. An expert entry hashes the expert's six MXFP4
// tensors concatenated in storage order (w1.packed, w1.scale, w2.packed, ...):
// exactly the bytes of its slot, identical in a source, a placed drive and a
// repacked container. The routed experts' own six tensors get no tensor entry.
//
// Version 2: model_fingerprint is Checkpoint::fingerprint() as it is since it
// covers the weights (shared/checkpoint/model_identity.h); a version 1 file is
// refused, naming the fix (run k3ctl manifest again).
//
// The manifest file is untrusted input: every line is checked and the first
// problem is refused with its line number.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shared/base/hash.h"
#include "shared/status.h"

namespace k3::checkpoint {

inline constexpr int kManifestVersion = 2;

struct ManifestEntry {
  enum class Kind { kTensor, kExpert };
  Kind kind = Kind::kTensor;
  std::string name;  // logical name (no "language_model." prefix)
  // Tensors: the stored format.
  std::string dtype;
  std::vector<int64_t> shape;
  // Experts.
  int64_t layer = -1;
  int64_t id = -1;
  uint64_t bytes = 0;
  base::Hash128 hash;
};

struct ManifestHeader {
  uint64_t fingerprint = 0;  // Checkpoint::fingerprint() of the model hashed
  uint64_t entries = 0;      // entry lines that follow
};

std::string manifest_header_line(const ManifestHeader& h);
std::string manifest_entry_line(const ManifestEntry& e);
// Parse one line; `where` prefixes errors (e.g. "FILE:12").
StatusOr<ManifestHeader> parse_manifest_header(std::string_view line, std::string_view where);
StatusOr<ManifestEntry> parse_manifest_entry(std::string_view line, std::string_view where);

// An immutable, loaded manifest. Thread-safe.
class Manifest {
 public:
  // Reads and checks a whole manifest: header first, exactly `entries` entry
  // lines, no duplicate key, the last line ending in a newline.
  static StatusOr<Manifest> load(const std::string& path);
  static StatusOr<Manifest> parse(std::string_view text, std::string_view label);

  const ManifestHeader& header() const { return header_; }
  const std::vector<ManifestEntry>& entries() const { return entries_; }
  // nullptr when the manifest has no such entry.
  const ManifestEntry* tensor(const std::string& name) const;
  const ManifestEntry* expert(int64_t layer, int64_t id) const;

 private:
  ManifestHeader header_;
  std::vector<ManifestEntry> entries_;
  std::map<std::string, size_t> tensors_;
  std::map<std::pair<int64_t, int64_t>, size_t> experts_;
};

}  // namespace k3::checkpoint
