// `k3ctl repack`: writes a container (shared/checkpoint/container.h) from a
// source checkpoint in one pass over it (each source byte read once), never
// writing to the source.
//
// Output shards: 1 = the dense part; 2.. = the routed experts of one MoE layer
// each (none with dense_only). Dense matrices are quantized with the engine's
// load-time algorithm (the row quantizers of shared/kernels/dense.h, as
// DenseMatrix::set_rows calls them, on rows widened to f32); experts are copied
// byte for byte. Each shard is written as NAME.partial and renamed when
// complete; a run finding a complete shard of the same plan keeps it (resume
// per shard), so disjoint shard ranges may run at once into one destination.
// After its shards every run rebuilds model.safetensors.index.json from all the
// complete shards (under a lock, written to a temporary name and renamed),
// refusing a tensor held by two of them.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "shared/status.h"

namespace k3::checkpoint {

struct RepackProgress {
  int64_t shard = 0, shards = 0;  // the output shard being written (1-based), of all
  uint64_t bytes_done = 0;        // output bytes written by this run
  uint64_t bytes_total = 0;       // output bytes this run writes
  double seconds = 0;
};

struct RepackOptions {
  std::string model_dir;
  std::string out_dir;
  int dense_bits = 4, mla_bits = 8, head_bits = 8;  // 4 or 8; 32 (F32) for MLA and head
  bool dense_only = false;
  // Output shards to write, 1-based inclusive; 0, 0: all.
  int64_t first_shard = 0, last_shard = 0;
  // Re-reads every expert byte of the selected shards and compares it with
  // the source.
  bool verify = false;
  // Refuses a source whose index names missing shards, even of tensors the
  // model does not use (default: they are reported in RepackResult).
  bool strict = false;
  // Called after every piece written (at most a few MB apart).
  std::function<void(const RepackProgress&)> progress;
};

struct RepackResult {
  int64_t shards = 0;           // output shards of the complete container
  int64_t shards_written = 0;   // by this run
  int64_t shards_kept = 0;      // selected, found complete (resumed)
  int64_t shards_complete = 0;  // in the rebuilt index
  uint64_t bytes_written = 0;
  uint64_t implied_bytes = 0;    // data bytes of the complete container
  uint64_t container_bytes = 0;  // file bytes of the complete shards
  uint64_t source_bytes = 0;     // tensor bytes of the source
  int64_t experts_verified = 0;
  int64_t dropped_tensors = 0;  // source tensors outside the text model (vision tower)
  // One line per shard of the source's index missing from disk that holds
  // only tensors the model does not use (Checkpoint::missing_shard_warnings).
  std::vector<std::string> missing_shard_warnings;
  double seconds = 0;
};

StatusOr<RepackResult> repack(const RepackOptions& opt);

// "A-B" or "A" -> [A, B]; 1 <= A <= B.
StatusOr<std::pair<int64_t, int64_t>> parse_shard_range(const std::string& text);

}  // namespace k3::checkpoint
