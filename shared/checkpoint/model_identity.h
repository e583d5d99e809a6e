// The model's identity (its fingerprint): which weights a process serves, so
// that an engined never computes on the experts of another checkpoint with the
// same config (two `k3ctl mkmodel` seeds, a base model and its fine-tune).
//
// fingerprint = hash(config.json as data, the logical tensor list it implies,
//                    a sample of the weights' bytes)
//
// The sample must be one every process of one snapshot can take, whichever
// shards it opens and in whatever form they are stored:
//   - engined opens only the dense shards (ShardPolicy::kDense);
//   - an expertd's drive holds only routed experts, re-laid out by `k3ctl place`
//     into files of its own (other names, offsets and order);
//   - a container (`k3ctl repack`) re-quantizes the dense matrices.
// No weight byte is in all three, so the identity is taken where the bytes
// are and carried where they are not:
//   1. The sample is of the input embedding (`model.embed_tokens.weight`): the
//      one tensor every dense holder has, that a container passes through
//      byte for byte, and that every training run changes. kIdentityPages
//      pages of kIdentityPageBytes at fixed fractions of the tensor's bytes
//      (first and last included), read with pread: positions in the tensor,
//      never in the file, so shard boundaries, offsets and headers do not
//      enter it. Cost at start, on the real checkpoint (a 2.35 GB BF16
//      embedding in shard 1 of 96): 8 reads of 4 KiB, ~1 ms on NVMe (~0.1 ms
//      each), ~80 ms on a cold disk (~10 ms each), whatever the 1.5 TB.
//   2. Every file `k3ctl place` and `k3ctl repack` write carries the source's
//      fingerprint in its safetensors "__metadata__" (kFingerprintMetadataKey),
//      so a drive of experts alone has its identity, and a file left on a
//      drive by the placement of another model (place keeps complete files) is
//      found at the next start: all the stamps of the files a process opens,
//      and the sampled value when it has the embedding, must agree.
// A raw set of shards with neither the embedding nor a stamp (an expert-only
// drive not made by `k3ctl place`) has no identity and is refused at open.
// Deliberate tampering (bytes altered under a right stamp) is the integrity
// manifest's job (shared/checkpoint/manifest.h), not this.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "shared/base/file.h"
#include "shared/base/hash.h"
#include "shared/checkpoint/safetensors.h"
#include "shared/status.h"

namespace k3::checkpoint {

// The safetensors "__metadata__" key of the stamp: 16 lower-case hex digits.
inline constexpr const char* kFingerprintMetadataKey = "k3_model_fingerprint";
// The sampled tensor (model name, without the multimodal prefix).
inline constexpr std::string_view kIdentityTensor = "model.embed_tokens.weight";
inline constexpr uint64_t kIdentityPageBytes = 4096;
inline constexpr int kIdentityPages = 8;

// The (offset, length) ranges sampled of a tensor of `nbytes` bytes:
// kIdentityPages pages at evenly spaced positions from the first byte to the
// last (page-aligned in the tensor; the last page ends at the last byte), a
// page overlapping the one before cut to its new bytes; the whole tensor when
// it is at most one page. Sorted, disjoint.
std::vector<std::pair<uint64_t, uint64_t>> identity_sample_ranges(uint64_t nbytes);

// XXH3-128 of the tensor's byte count and its sampled ranges, read from `f`
// (which holds `t`) with pread. A short or failed read is an error naming
// `path` and the tensor.
StatusOr<base::Hash128> sample_weights(const base::File& f, const std::string& path,
                                       const TensorInfo& t);

// The fingerprint of a model with config.json `config_text` whose weights
// sampled to `weights`. Key order and white space of the config do not matter.
uint64_t model_fingerprint(std::string_view config_text, const base::Hash128& weights);

// What a process found about its model's identity at open.
struct IdentityEvidence {
  // model_fingerprint() of the sampled embedding, when a file opened holds it.
  std::optional<uint64_t> sampled;
  std::string sampled_from;  // the file that holds the embedding
  // (file, value) of every opened file carrying a stamp.
  std::vector<std::pair<std::string, uint64_t>> stamps;
};

// The fingerprint the evidence agrees on. FAILED_PRECONDITION naming the two
// files when they disagree (files of two models), and when there is no
// evidence at all (naming the embedding and what would give one); DATA_LOSS
// when the file holding the embedding disagrees with its own stamp (its bytes
// changed after k3ctl wrote it).
StatusOr<uint64_t> resolve_identity(const IdentityEvidence& e, std::string_view where);

// The stamp of one file's header metadata: nullopt when it carries none;
// INVALID_ARGUMENT naming the file and the key when it is not 16 lower-case hex
// digits.
StatusOr<std::optional<uint64_t>> read_stamp(const SafetensorsHeader& h, std::string_view path);

}  // namespace k3::checkpoint
