// Per-sequence decode state: what a conversation carries from one token to the
// next (K3_MODEL.md: KDA state S and the last K-1 pre-conv rows of q, k, v per
// KDA layer; the latent cache ckv + k_r per position per MLA layer).
#pragma once

#include <cstdint>
#include <vector>

#include "shared/checkpoint/model_config.h"

namespace k3::engined {

struct KdaState {
  std::vector<float> s;                       // [H][d][d], S[k][v]
  std::vector<float> conv_q, conv_k, conv_v;  // [(K-1)][P], oldest first
};

struct MlaCache {
  std::vector<float> ckv;  // [pos][kv_lora] (normalized)
  std::vector<float> k_r;  // [pos][rope] (raw)
};

// Not thread-safe; one forward pass at a time.
struct SequenceState {
  explicit SequenceState(const checkpoint::ModelConfig& c);
  int64_t position = 0;  // tokens processed
  // False after a forward pass failed midway: the state is then inconsistent
  // and the sequence must be discarded.
  bool valid = true;
  std::vector<KdaState> kda;  // [layers] (empty for MLA layers)
  std::vector<MlaCache> mla;  // [layers] (empty for KDA layers)
  // Bytes held (KDA states + conv windows + MLA caches).
  size_t bytes() const;
};

}  // namespace k3::engined
