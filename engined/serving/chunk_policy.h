// The prefill chunk policy (issue 26 item 2): how big a chunk a long prompt
// is read in, and when a prompt is long enough for it. A big chunk reads
// each distinct expert of a layer once for all its tokens, so the bytes per
// token fall with its size (on the real model's 896 experts a layer's
// union is every expert from about 256 tokens on); what bounds it is the RAM
// the pass holds per token (chunk_pass.h: the lane's rows, the AttnRes
// bank, the routed experts' rows). It needs no tuning: engined's --chunk
// turns it off.
#pragma once

#include <cstdint>
#include <vector>

#include "shared/checkpoint/model_config.h"

namespace k3::engined {

struct ChunkPolicy {
  // A prompt with at least this many tokens left goes through a pass;
  // shorter ones go in the model's chunk beside the decode steps.
  static constexpr int64_t kMinTokens = 128;
  // The largest chunk: the hosts' receive cap allows 4096; at 2048 the
  // real model's layer already reads each expert for ~37 tokens.
  static constexpr int64_t kMaxTokens = 2048;
  // The pass's RAM for its buffers: an eighth of the machine's, at most
  // this.
  static constexpr uint64_t kMaxBufferBytes = uint64_t{2} << 30;

  // The pass's bytes per token of the chunk for model `c`.
  static uint64_t bytes_per_token(const checkpoint::ModelConfig& c);
  // The largest chunk for `c` on a machine with `ram_bytes`: within the
  // buffer budget and kMaxTokens, at least kMinTokens, and a multiple of
  // `snapshot_tokens` (> 0) when one fits, so chunks end at snapshot
  // positions.
  static int64_t max_tokens(const checkpoint::ModelConfig& c, uint64_t ram_bytes,
                            int64_t snapshot_tokens);
  // Where a chunk starting at `pos` of a prompt of `n` tokens ends: at most
  // `max` tokens on, or at the first turn boundary (`checkpoints`, sorted)
  // inside that; and short of that end at the last multiple of
  // `snapshot_tokens` (> 0) after `pos` (an edit before a turn boundary or
  // the prompt's end then reads again from there).
  static int64_t end(int64_t pos, int64_t n, int64_t max, const std::vector<int64_t>& checkpoints,
                     int64_t snapshot_tokens);
};

// The machine's RAM in bytes (sysconf), 0 when unknown.
uint64_t physical_ram_bytes();

}  // namespace k3::engined
