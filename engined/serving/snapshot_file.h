// One saved sequence state on disk (--checkpoint-dir): the file format of
// engined's turn checkpoints and prefill snapshots. Files outlive the process
// and may be shared by several engined processes, so a file is untrusted
// input: every size comes from the model's geometry, never from the file; the
// header (with the token ids it covers) has its own XXH3-128 so a directory is
// indexed without reading whole states; the whole file has another, checked
// before any byte of the state is handed out (never half-read).
//
// Layout (little-endian, as the host writes it):
//   [0, 48)    magic "K3SNAPSH", u32 version, u32 dense_bits, u64 model
//              fingerprint, f32 expert_top_p, u32 0, u64 n_tokens, u64
//              payload bytes
//   [48, 64)   XXH3-128 (hi, lo) of [0, 48) and the token ids
//   tokens     i32 [n_tokens]
//   payload    per layer: S, conv_q, conv_k, conv_v (KDA), ckv, k_r (MLA) as
//              f32 of the geometry's sizes; then the last logits [vocab]
//   trailer    XXH3-128 (hi, lo) of every byte before it
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engined/model/state.h"
#include "shared/checkpoint/model_config.h"
#include "shared/status.h"

namespace k3::engined {

// A restored state: the sequence after `tokens` and the logits of its last
// position [vocab].
struct RestoredState {
  std::unique_ptr<SequenceState> state;
  std::vector<float> logits;
  int64_t tokens = 0;
};

// What a state was computed under: a state is used only by a request of the
// same model, dense bits and routed-expert top-p.
struct SnapshotIdentity {
  uint64_t fingerprint = 0;
  int dense_bits = 0;
  float expert_top_p = 1.0f;
  bool operator==(const SnapshotIdentity&) const = default;
};

// A file's header, validated (its hash, its size against the geometry).
struct SnapshotHeader {
  SnapshotIdentity identity;
  std::vector<int32_t> tokens;
  uint64_t file_bytes = 0;
};

// 2: the model fingerprint covers sampled weights (shared/checkpoint/
// model_identity.h); a version 1 file's fingerprint means something else and
// the file is refused as of another format, never compared.
inline constexpr uint32_t kSnapshotVersion = 2;

// The file's size for a state after `n_tokens` tokens of this model.
uint64_t snapshot_file_bytes(const checkpoint::ModelConfig& config, int64_t n_tokens);

// "snap-<32 hex>.k3snap": the XXH3-128 of the identity and the tokens, so two
// processes saving the same state write the same name (the later rename
// replaces an identical file).
std::string snapshot_file_name(const SnapshotIdentity& id, const std::vector<int32_t>& tokens);
// Whether `name` is one snapshot_file_name() makes.
bool is_snapshot_file_name(const std::string& name);
// Temporaries: ".snap-<32 hex>.k3snap.tmp.<pid>.<n>" (unique per process).
bool is_snapshot_temp_name(const std::string& name);

// Writes the state after `tokens` (state.position == tokens.size()) to a
// unique temporary beside `path`, then renames it to `path`. Thread-safe
// (touches only its own temporary). UNAVAILABLE when the disk refuses.
Status write_snapshot_file(const std::string& path, const SnapshotIdentity& id,
                           const std::vector<int32_t>& tokens, const SequenceState& state,
                           const std::vector<float>& logits);

// Reads and checks a file's header: NOT_FOUND when it is gone,
// FAILED_PRECONDITION for another format version, DATA_LOSS when the header
// is corrupt or the file's size is not the geometry's.
StatusOr<SnapshotHeader> read_snapshot_header(const std::string& path,
                                              const checkpoint::ModelConfig& config);

// Reads a whole file, checks its XXH3-128 and that it is of `id` and exactly
// `tokens`: NOT_FOUND when the file is gone, FAILED_PRECONDITION when it is
// of another model, bits or top-p, DATA_LOSS when corrupt or truncated.
StatusOr<RestoredState> read_snapshot_file(const std::string& path,
                                           const checkpoint::ModelConfig& config,
                                           const SnapshotIdentity& id,
                                           const std::vector<int32_t>& tokens);

}  // namespace k3::engined
