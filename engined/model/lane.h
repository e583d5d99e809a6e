// The per-layer steps of the forward pass over a lane: one or more pieces'
// token rows back to back, each piece a sequence (K3_MODEL.md "AttnRes").
// Model::forward_chunk runs them on whole lanes; a ChunkPass (chunk_pass.h)
// runs them on row ranges of one piece so a big chunk can stop between
// them. Every step is row-wise except attention, which advances each
// sequence's state token by token in row order, so calling a step on
// consecutive row ranges gives the bits of one call on all of them.
#pragma once

#include <cstdint>
#include <vector>

#include "engined/model/layers.h"
#include "engined/model/state.h"
#include "engined/model/weights.h"
#include "shared/base/huge_pages.h"
#include "shared/status.h"

namespace k3::engined {

struct Lane {
  size_t first_piece = 0;   // index of its first piece in the chunk
  int64_t row0 = 0, T = 0;  // its rows in the chunk
  std::vector<SequenceState*> seqs;
  std::vector<int64_t> lens;
  std::vector<float> row_top_p;  // per row; empty when every piece has 1.0
  // T x hidden rows each: huge-page buffers (huge_pages.h) at a long
  // prompt's sizes.
  base::HugeVector<float> stream, acc, a_in, xn, sub;
  std::vector<base::HugeVector<float>> bank;
  bool snapshot_this_layer = false;  // the bank's last entry is this layer's input
  MoeInFlight pending;               // its routed request in flight
};

// Not thread-safe (one lane at a time; the OpenMP inside the kernels aside).
class LaneLayers {
 public:
  // `attention_seconds` accumulates the time inside KDA/MLA.
  LaneLayers(const ModelWeights& w, double* attention_seconds)
      : w_(w), attention_seconds_(attention_seconds) {}

  // Sizes the lane's buffers for its T rows and embeds `ids` (its rows).
  void start(Lane& ln, const int32_t* ids) const;
  // Layer l begins for the whole lane: on an AttnRes block boundary the
  // incoming stream joins the bank (acc restarts at 0), else acc = stream.
  void begin_layer(Lane& ln, int64_t l) const;
  // Rows [r0, r1) of layer l up to its MoE/FFN input (ln.xn): AttnRes mix,
  // input norm, attention (each piece's rows in order, at their positions),
  // acc += attention, mix, post norm. Ranges go in row order.
  void attend(Lane& ln, int64_t l, int64_t r0, int64_t r1) const;
  // Rows [r0, r1) of a dense FFN layer into ln.sub.
  void ffn(Lane& ln, int64_t l, int64_t r0, int64_t r1) const;
  // Rows [r0, r1) of layer l end: stream = acc + sub; the first layer whose
  // output goes non-finite fails that piece in piece_status (indexed by
  // piece in the chunk; rows of one piece never reach another's).
  void end_rows(Lane& ln, int64_t l, int64_t r0, int64_t r1,
                std::vector<Status>* piece_status) const;
  // The final AttnRes mix and norm of row t of the lane into out [D].
  void head_input(Lane& ln, int64_t t, float* out) const;

 private:
  // AttnRes mix of row t of `v` over the first n_bank bank entries.
  void mix(const Lane& ln, size_t n_bank, const float* v, int64_t t, const std::vector<float>& sw,
           float* out) const;

  const ModelWeights& w_;
  double* attention_seconds_;
};

}  // namespace k3::engined
