// What the integrity manifest covers in one checkpoint, and reading it back:
// the plan (every tensor, except the routed experts' own tensors, and every
// routed expert present, each as byte spans of the shard files) and a hasher
// that reads those spans with O_DIRECT (buffered where the filesystem refuses
// it) and returns their XXH3-128. Used by `k3ctl manifest` / `k3ctl verify`.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "shared/base/hash.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/manifest.h"
#include "shared/status.h"

namespace k3::checkpoint {

struct FileSpan {
  uint32_t file = 0;  // Checkpoint::files() index
  uint64_t offset = 0;
  uint64_t length = 0;
};

// One manifest entry to be (re)computed: the entry's key and format fields
// (hash unset) and where its bytes are, in hash order.
struct IntegrityItem {
  ManifestEntry entry;
  std::vector<FileSpan> spans;
};

// Every item of `ck`, ordered by (file, offset) so a pass reads each file
// sequentially. Experts are those whose six tensors are all present (a drive
// holding part of a model has part of its experts); an expert with only some
// of its tensors is refused. Needs a valid config.json for the expert names.
StatusOr<std::vector<IntegrityItem>> integrity_plan(const Checkpoint& ck);

// Reads spans into a private aligned buffer. One per thread (not thread-safe);
// the checkpoint must outlive it.
class SpanHasher {
 public:
  static StatusOr<std::unique_ptr<SpanHasher>> create(const Checkpoint& ck, bool direct);
  ~SpanHasher();
  // XXH3-128 of the item's spans, concatenated. `on_bytes(n)` is called as
  // bytes are hashed (progress). Errors name the file and offset.
  template <typename OnBytes>
  StatusOr<base::Hash128> hash(const IntegrityItem& item, OnBytes&& on_bytes);
  // True when every file was opened with O_DIRECT.
  bool direct() const;

 private:
  struct Impl;
  explicit SpanHasher(std::unique_ptr<Impl> impl);
  Status hash_span(const FileSpan& s, base::Xxh3Stream& h, void (*cb)(void*, uint64_t), void* ctx);
  std::unique_ptr<Impl> impl_;
};

// engined --manifest: every dense tensor `ck` holds (all but the routed
// experts' own tensors) read (O_DIRECT where allowed) and checked against `m`:
// stored format and XXH3-128. The first problem is DATA_LOSS naming the
// tensor, its file and offset (a tensor absent from the manifest, or stored in
// another format, too). The caller checks the fingerprint. `bytes_checked`
// (optional) gets the bytes hashed.
Status verify_dense_tensors(const Checkpoint& ck, const Manifest& m,
                            uint64_t* bytes_checked = nullptr);

template <typename OnBytes>
StatusOr<base::Hash128> SpanHasher::hash(const IntegrityItem& item, OnBytes&& on_bytes) {
  base::Xxh3Stream h;
  auto cb = [](void* ctx, uint64_t n) { (*static_cast<std::decay_t<OnBytes>*>(ctx))(n); };
  for (const FileSpan& s : item.spans) K3_RETURN_IF_ERROR(hash_span(s, h, cb, &on_bytes));
  return h.digest();
}

}  // namespace k3::checkpoint
