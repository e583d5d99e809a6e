// The drive's ceiling for the expert read pattern, shared by `bench io`,
// `bench decode` and `doctor`: io_uring reads with registered buffers and
// files of the byte ranges decode reads (batches of top-k experts of one
// layer, each batch in disk order, every expert in aligned chunks).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/expert_index.h"
#include "shared/checkpoint/model_config.h"
#include "shared/status.h"

namespace k3::tools {

// GB/s over `seconds` at queue depth `qd`. `direct`: O_DIRECT
// (FAILED_PRECONDITION where the filesystem refuses it); else buffered,
// which from a warm page cache measures the page cache's copy rate.
StatusOr<double> raw_read_gbps(const checkpoint::Checkpoint& ck, const checkpoint::ExpertIndex& idx,
                               const checkpoint::ModelConfig& c, int qd, uint64_t chunk,
                               double seconds, bool direct = true);

// The next read: file (an index into the paths), offset and length, at most
// the chunk size; offsets and lengths 4 KiB-aligned for O_DIRECT.
struct ReadChunk {
  int file = 0;
  uint64_t offset = 0, length = 0;
};

// The read loop under raw_read_gbps: `paths` opened (O_DIRECT when `direct`:
// FAILED_PRECONDITION naming the file where refused), registered with the
// ring with `qd` registered buffers of `chunk` bytes, reads from `next` kept
// `qd` deep for `seconds`. GB/s read.
StatusOr<double> uring_read_gbps(const std::vector<std::string>& paths,
                                 const std::function<ReadChunk()>& next, int qd, uint64_t chunk,
                                 double seconds, bool direct = true);

}  // namespace k3::tools
