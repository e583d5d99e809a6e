// The drive's ceiling for the expert read pattern, shared by `bench io`,
// `bench decode` and `doctor`: io_uring reads with registered buffers and
// files of the byte ranges decode reads (batches of top-k experts of one
// layer, each batch in disk order, every expert in aligned chunks).
#pragma once

#include <cstdint>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/expert_index.h"
#include "shared/checkpoint/model_config.h"
#include "shared/status.h"

namespace k3::tools {

// The next read: file (an index into the paths), offset and length, at most
// the chunk size; offsets and lengths 4 KiB-aligned for O_DIRECT.
struct ReadChunk {
  int file = 0;
  uint64_t offset = 0, length = 0;
};

// Decode's expert byte ranges as an endless stream of chunks: batches of
// top-k distinct experts of one random MoE layer, each batch in disk order,
// every expert's O_DIRECT span in `chunk`-byte pieces. A stream kept across
// measurement windows goes on to new draws; one made per window reads the
// same ranges again each time (which some virtual disks serve at another
// rate than fresh ones).
class ExpertRangeStream {
 public:
  ExpertRangeStream(const checkpoint::ExpertIndex& idx, const checkpoint::ModelConfig& c,
                    uint64_t chunk, uint64_t seed = 99);
  ReadChunk next();
  uint64_t chunk() const { return chunk_; }

 private:
  const checkpoint::ExpertIndex& idx_;
  int64_t first_, layers_, experts_, k_;
  uint64_t chunk_;
  std::mt19937_64 rng_;
  std::vector<std::pair<uint32_t, uint64_t>> batch_;  // (file, offset) of each expert, sorted
  size_t batch_pos_ = 0;
  uint64_t cur_off_ = 0, cur_end_ = 0;
  int cur_file_ = 0;
};

// GB/s over `seconds` at queue depth `qd` of `stream`'s reads (in its
// chunks). `direct`: O_DIRECT (FAILED_PRECONDITION where the filesystem
// refuses it); else buffered, which from a warm page cache measures the page
// cache's copy rate. `dests`: see uring_read_gbps.
StatusOr<double> raw_read_gbps(const checkpoint::Checkpoint& ck, ExpertRangeStream& stream, int qd,
                               double seconds, bool direct = true,
                               const std::vector<uint8_t*>& dests = {});

// The same over a stream of its own (seed 99).
StatusOr<double> raw_read_gbps(const checkpoint::Checkpoint& ck, const checkpoint::ExpertIndex& idx,
                               const checkpoint::ModelConfig& c, int qd, uint64_t chunk,
                               double seconds, bool direct = true);

// The read loop under raw_read_gbps: `paths` opened (O_DIRECT when `direct`:
// FAILED_PRECONDITION naming the file where refused), registered with the
// ring with `qd` registered buffers of `chunk` bytes, reads from `next` kept
// `qd` deep for `seconds`. GB/s read. The reads land in `dests` (at least
// qd of them, else INVALID_ARGUMENT: chunk-sized, 4 KiB-aligned destinations
// of the caller's, all registered, each taking its turn) when given, else in
// qd chunks of the call's own: on some virtual machines a read's rate depends on the pages it
// lands in (4 KiB or huge, touched before or fresh, which host memory backs
// them), so a ceiling compared with expertd reads into memory like its
// segment's, spread over as many pages.
StatusOr<double> uring_read_gbps(const std::vector<std::string>& paths,
                                 const std::function<ReadChunk()>& next, int qd, uint64_t chunk,
                                 double seconds, bool direct = true,
                                 const std::vector<uint8_t*>& dests = {});

}  // namespace k3::tools
