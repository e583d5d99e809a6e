// The drive's ceiling for the expert read pattern, shared by `bench io` and
// `bench decode`: io_uring reads with registered buffers and files of the
// byte ranges decode reads (batches of top-k experts of one layer, each batch
// in disk order, every expert in aligned chunks).
#pragma once

#include <cstdint>

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

}  // namespace k3::tools
