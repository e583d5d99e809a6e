#include "engined/serving/chunk_policy.h"

#include <unistd.h>

#include <algorithm>

namespace k3::engined {

uint64_t ChunkPolicy::bytes_per_token(const checkpoint::ModelConfig& c) {
  const uint64_t D = static_cast<uint64_t>(c.hidden_size);
  const uint64_t blocks = static_cast<uint64_t>(
      (c.num_hidden_layers + std::max<int64_t>(c.attn_res_block_size, 1) - 1) /
      std::max<int64_t>(c.attn_res_block_size, 1));
  const uint64_t K = static_cast<uint64_t>(c.num_experts_per_token);
  const uint64_t lat = static_cast<uint64_t>(c.routed_expert_hidden_size);
  // Floats: stream, acc, a_in, xn, sub, the bank's snapshots, the shared
  // experts' rows; the routed rows (K x latent), the latent activations (f32,
  // int8 and their scales).
  return 4 * (D * (5 + blocks + 1) + K * lat + lat) + lat + lat / 8;
}

int64_t ChunkPolicy::max_tokens(const checkpoint::ModelConfig& c, uint64_t ram_bytes,
                                int64_t snapshot_tokens) {
  const uint64_t budget =
      std::min(kMaxBufferBytes, ram_bytes > 0 ? ram_bytes / 8 : kMaxBufferBytes);
  int64_t t = static_cast<int64_t>(budget / std::max<uint64_t>(bytes_per_token(c), 1));
  t = std::clamp(t, kMinTokens, kMaxTokens);
  if (snapshot_tokens > 0 && snapshot_tokens <= t) t = t / snapshot_tokens * snapshot_tokens;
  return t;
}

int64_t ChunkPolicy::end(int64_t pos, int64_t n, int64_t max,
                         const std::vector<int64_t>& checkpoints, int64_t snapshot_tokens) {
  int64_t end = std::min(n, pos + max);
  for (int64_t q : checkpoints)
    if (q > pos && q < end) {
      end = q;  // a turn boundary: saved as a checkpoint
      break;
    }
  // Short of it, the last snapshot position, the last one before the
  // prompt's end or a turn boundary included: an edit in the prompt's last
  // part then reads again from there, not from the chunk's start.
  if (snapshot_tokens > 0) {
    const int64_t q = end / snapshot_tokens * snapshot_tokens;
    if (q > pos) return q;
  }
  return end;
}

uint64_t physical_ram_bytes() {
  const long pages = sysconf(_SC_PHYS_PAGES), size = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && size > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(size) : 0;
}

}  // namespace k3::engined
