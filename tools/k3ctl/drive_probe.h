// `k3ctl doctor`'s drive measurement: O_DIRECT reads through io_uring with
// registered buffers (drive_ceiling.h, what `bench io` measures with) of
// expert-sized spans at random places in a file big enough to mean
// something: the largest shard on the drive when it is at least
// `min_file_bytes`, else a temporary file of that size written for the
// purpose and removed afterwards (also when the measurement fails, and on
// SIGINT, SIGTERM or SIGHUP).
//
// Not thread-safe: one probe at a time (the signal clean-up names one file).
#pragma once

#include <cstdint>
#include <string>

#include "shared/status.h"

namespace k3::tools {

struct DriveProbeOptions {
  double seconds = 3;                    // reading, split over the queue depths tried
  uint64_t min_file_bytes = 256u << 20;  // smaller files measure caches, not the drive
  uint64_t span_bytes = 17547264;        // one read span: a real K3 expert
  uint64_t chunk_bytes = 4u << 20;       // one io_uring read
};

struct DriveProbe {
  std::string file;        // what was read
  bool temporary = false;  // a file the probe wrote (and removed)
  uint64_t file_bytes = 0;
  double gbps = 0;  // the best of the queue depths tried
  int queue_depth = 0;
  double seconds = 0;  // reading time in all
};

// Measures `dir`. Errors: FAILED_PRECONDITION for a directory in RAM (tmpfs,
// ramfs: nothing of a drive to measure) and where the filesystem refuses
// O_DIRECT (the message says which filesystem), RESOURCE_EXHAUSTED
// when a temporary file is needed and does not fit, others from the reads.
StatusOr<DriveProbe> probe_drive(const std::string& dir, const DriveProbeOptions& options);

// The filesystem type of `dir` by name ("tmpfs", "ext4", "xfs", ...), or
// "unknown".
std::string filesystem_name(const std::string& dir);

}  // namespace k3::tools
