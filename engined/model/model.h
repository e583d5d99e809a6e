// The K3 model: weights in RAM, routed experts from an ExpertSource, and the
// forward pass over chunks of tokens (layer-major, K3_MODEL.md "AttnRes").
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "engined/model/speculator.h"
#include "engined/model/state.h"
#include "engined/model/weights.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/expert_index.h"
#include "shared/checkpoint/manifest.h"
#include "shared/experts/expert_source.h"

namespace k3::engined {

struct EngineOptions {
  QuantConfig quant;
  bool int8_experts = true;       // int8-activation MXFP4 kernel (else the float kernel)
  int64_t chunk = 32;             // prefill chunk (1 = token at a time)
  int64_t max_context = 1 << 20;  // positions a sequence may hold
  // --manifest: the dense tensors are checked against it at load (a mismatch
  // names the tensor and refuses the load); a manifest of another model is
  // refused. With quant.mmap the check reads every mapped byte, so it runs
  // only when verify_dense is set.
  std::shared_ptr<const checkpoint::Manifest> manifest;
  bool verify_dense = false;
  // Routed-expert pruning (issue 11 item 5): per token, experts in
  // descending gate weight until their cumulative share reaches this,
  // renormalised; 1.0 = off (every top-k expert). In (0, 1]. A batch piece
  // may ask for its own.
  float expert_top_p = 1.0f;
  // Speculative reads of the next MoE layer's predicted experts
  // (speculator.h). Never changes outputs.
  SpeculationMode speculation = SpeculationMode::kAuto;
  // With two or more sequences in a pass: 2 splits them into two groups
  // offset by half a layer, so one group's attention and dense work run while
  // the other group's routed experts are read (issue 11 item 1b); 1 runs
  // them as one group. Never changes outputs.
  int sequence_groups = 2;
};

// Where a forward pass spent its time (accumulated).
struct ForwardTimes {
  double attention_seconds = 0;  // KDA + MLA layers
  double dense_seconds = 0;      // FFNs, routing, latent and shared experts, AttnRes, head
  double expert_compute_seconds = 0;
  double expert_wait_seconds = 0;  // unhidden I/O
  int64_t tokens = 0;
  uint64_t experts_pruned = 0;  // (token, expert) pairs top-p dropped
};

// Thread-compatible: const methods are safe; forward() needs exclusive use of
// the expert source it is given (one forward at a time per source).
class ChunkPass;

class Model {
 public:
  // Opens the shards of DIR (+ extra shard dirs) that hold dense tensors
  // (never a shard holding only experts), validates, loads and quantizes the
  // dense weights. Routed experts come from the ExpertSource each forward is
  // given (engined/experts/source_factory.h builds one).
  static StatusOr<std::unique_ptr<Model>> load(const std::string& model_dir,
                                               const std::vector<std::string>& extra_dirs,
                                               const EngineOptions& opt);

  const checkpoint::ModelConfig& config() const { return weights_->config; }
  const EngineOptions& options() const { return opt_; }
  const ModelWeights& weights() const { return *weights_; }
  std::unique_ptr<SequenceState> new_sequence() const;

  // Runs `ids` after what `seq` holds, in chunks of options().chunk. Logits
  // [n][vocab] are written for the last `n_logits` tokens (n_logits <= ids.size();
  // all of them for teacher-forced scoring, 1 for generation). When `cancel`
  // becomes true the pass stops before the next layer with CANCELLED (the
  // state is then invalid).
  Status forward(k3::experts::ExpertSource& experts, SequenceState& seq,
                 const std::vector<int32_t>& ids, int64_t n_logits, std::vector<float>* logits,
                 const std::atomic<bool>* cancel = nullptr);

  // Several sequences in one pass (continuous batching): each piece runs its
  // ids after what its sequence holds. The dense layers, the routed experts
  // (fetched once for the union) and the head run on all tokens together;
  // only attention runs per sequence. Results are bit-identical to running
  // the pieces one by one. Logits [pieces wanting them][vocab] of each such
  // piece's last token, in piece order. On failure every piece's state is
  // invalid. Sequences must be distinct.
  //
  // Never NaN: a piece whose hidden state or logits go non-finite (a corrupt
  // weight) fails with DATA_LOSS naming the layer. Rows of different pieces
  // never mix, so with `piece_status` given only that piece fails (its state
  // invalid, its status there) and the others go on; without it the batch
  // fails. The check reads each layer's output once (T x hidden floats, next
  // to the layer's T x hidden x hidden multiply-adds).
  struct Piece {
    SequenceState* seq = nullptr;
    std::vector<int32_t> ids;
    bool want_logits = false;
    float expert_top_p = 0.0f;  // 0: options().expert_top_p; else in (0, 1]
  };
  Status forward_batch(k3::experts::ExpertSource& experts, const std::vector<Piece>& pieces,
                       std::vector<float>* logits, const std::atomic<bool>* cancel = nullptr,
                       std::vector<Status>* piece_status = nullptr);

  // A big prefill chunk of `ids` after what `seq` holds, run in parts
  // (chunk_pass.h) with the same outputs as forward(); logits of the last
  // token when `want_logits`. expert_top_p 0: options().expert_top_p. The
  // pass updates `seq` and times(); `seq` must outlive it and no other pass
  // may use `seq` meanwhile.
  StatusOr<std::unique_ptr<ChunkPass>> begin_chunk(SequenceState& seq, std::vector<int32_t> ids,
                                                   bool want_logits, float expert_top_p = 0.0f);

  uint64_t fingerprint() const;
  // Where the model was loaded from (an in-process expert source reads the
  // experts' shards there).
  const std::string& model_dir() const { return model_dir_; }
  const std::vector<std::string>& extra_dirs() const { return extra_dirs_; }

  // INVALID_ARGUMENT naming the first id outside the vocabulary.
  Status check_ids(const std::vector<int32_t>& ids) const;

  const ForwardTimes& times() const { return times_; }
  const SpeculationStats& speculation() const { return spec_.stats(); }
  // The lookahead's state, judged per expert source: a caller that runs
  // this model over several sources in turn (bench decode) swaps one in
  // per source, as if each had its own process.
  Speculator& speculator() { return spec_; }

 private:
  friend class ChunkPass;
  // One chunk of several pieces: `seqs`/`lens` give each piece's sequence and
  // token count ({T} ids back to back); logits for the tokens at `head_rows`.
  Status forward_chunk(k3::experts::ExpertSource& experts, const std::vector<SequenceState*>& seqs,
                       const std::vector<int64_t>& lens, const std::vector<float>& top_p,
                       const int32_t* ids, int64_t T, const std::vector<int64_t>& head_rows,
                       float* logits, const std::atomic<bool>* cancel,
                       std::vector<Status>* piece_status);
  // Posts a speculative request for `experts` of `layer` (a guess: errors
  // are dropped).
  void post_speculative(k3::experts::ExpertSource& experts, int64_t layer,
                        const std::vector<int64_t>& ids);
  // The --manifest checks of load(): fingerprint, then the dense tensors.
  Status verify_dense() const;
  // `ids` may run after `seq`: non-empty, in the vocabulary, within the context.
  Status check_piece(const SequenceState& seq, const std::vector<int32_t>& ids) const;

  EngineOptions opt_;
  std::string model_dir_;
  std::vector<std::string> extra_dirs_;
  std::unique_ptr<checkpoint::Checkpoint> ck_;  // the dense shards
  std::unique_ptr<ModelWeights> weights_;
  ForwardTimes times_;
  Speculator spec_;
};

}  // namespace k3::engined
