#include "engined/model/model.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "engined/model/lane.h"
#include "engined/model/layers.h"
#include "engined/model/ops.h"
#include "engined/model/parallel.h"
#include "shared/base/log.h"
#include "shared/base/seconds_since.h"
#include "shared/checkpoint/integrity.h"

namespace k3::engined {

using k3::experts::ExpertPriority;
using k3::experts::ExpertRequest;
using k3::experts::ExpertSource;
using k3::experts::ExpertSourceStats;

namespace {

using Clock = std::chrono::steady_clock;
using base::seconds_since;

}  // namespace

StatusOr<std::unique_ptr<Model>> Model::load(const std::string& model_dir,
                                             const std::vector<std::string>& extra_dirs,
                                             const EngineOptions& opt) {
  if (opt.chunk < 1) return absl::InvalidArgumentError("chunk must be >= 1");
  if (!(opt.expert_top_p > 0.0f && opt.expert_top_p <= 1.0f))
    return absl::InvalidArgumentError(
        cat("expert_top_p must be in (0, 1], not ", opt.expert_top_p));
  auto m = std::unique_ptr<Model>(new Model());
  m->opt_ = opt;
  m->spec_ = Speculator(opt.speculation);
  K3_ASSIGN_OR_RETURN(checkpoint::ModelConfig c, checkpoint::load_model_config(model_dir));
  m->model_dir_ = model_dir;
  m->extra_dirs_ = extra_dirs;
  K3_ASSIGN_OR_RETURN(
      m->ck_, checkpoint::Checkpoint::open(model_dir, extra_dirs, checkpoint::ShardPolicy::kDense));
  // A snapshot without its vision shards serves: nothing reads them.
  if (opt.quant.strict) K3_RETURN_IF_ERROR(m->ck_->refuse_missing_shards());
  for (const std::string& w : m->ck_->missing_shard_warnings())
    base::logger("engined")->warn("{}", w);
  if (opt.manifest != nullptr) K3_RETURN_IF_ERROR(m->verify_dense());
  K3_ASSIGN_OR_RETURN(m->weights_, load_weights(*m->ck_, c, opt.quant));
  return m;
}

Status Model::verify_dense() const {
  auto log = base::logger("engined");
  if (opt_.manifest->header().fingerprint != ck_->fingerprint())
    return absl::FailedPreconditionError(
        cat("the manifest is of another model (its fingerprint differs from ", model_dir_, "'s)"));
  if (opt_.quant.mmap && !opt_.verify_dense) {
    log->warn(
        "--manifest with --mmap: dense tensors not verified (--verify-dense reads every mapped "
        "byte); routed experts read in-process are");
    return absl::OkStatus();
  }
  const auto t0 = Clock::now();
  uint64_t bytes = 0;
  K3_RETURN_IF_ERROR(checkpoint::verify_dense_tensors(*ck_, *opt_.manifest, &bytes));
  log->info("dense tensors verified against the manifest: {} bytes in {:.3f} s", bytes,
            seconds_since(t0));
  return absl::OkStatus();
}

uint64_t Model::fingerprint() const {
  return ck_->fingerprint();
}

std::unique_ptr<SequenceState> Model::new_sequence() const {
  return std::make_unique<SequenceState>(config());
}

Status Model::check_ids(const std::vector<int32_t>& ids) const {
  const checkpoint::ModelConfig& c = config();
  for (size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= c.vocab_size)
      return absl::InvalidArgumentError(cat("token id ", ids[i], " at position ", i,
                                            " is outside the vocabulary [0, ", c.vocab_size, ")"));
  return absl::OkStatus();
}

Status Model::check_piece(const SequenceState& seq, const std::vector<int32_t>& ids) const {
  const int64_t n = static_cast<int64_t>(ids.size());
  if (n == 0) return absl::InvalidArgumentError("empty prompt: no token ids");
  if (!seq.valid)
    return absl::FailedPreconditionError("sequence state was left inconsistent by a failed pass");
  K3_RETURN_IF_ERROR(check_ids(ids));
  if (seq.position + n > opt_.max_context)
    return absl::OutOfRangeError(cat("sequence of ", seq.position + n,
                                     " tokens exceeds the context limit of ", opt_.max_context));
  return absl::OkStatus();
}

Status Model::forward(ExpertSource& experts, SequenceState& seq, const std::vector<int32_t>& ids,
                      int64_t n_logits, std::vector<float>* logits,
                      const std::atomic<bool>* cancel) {
  const checkpoint::ModelConfig& c = config();
  const int64_t n = static_cast<int64_t>(ids.size());
  K3_RETURN_IF_ERROR(check_piece(seq, ids));
  if (n_logits < 0 || n_logits > n)
    return absl::InvalidArgumentError("n_logits must be in [0, number of ids]");
  logits->assign(static_cast<size_t>(n_logits * c.vocab_size), 0.0f);
  const int64_t first_logit = n - n_logits;
  for (int64_t i0 = 0; i0 < n; i0 += opt_.chunk) {
    const int64_t T = std::min(opt_.chunk, n - i0);
    // Logits for this chunk's tokens at or after first_logit.
    const int64_t lo = std::max(first_logit, i0);
    std::vector<int64_t> rows;
    for (int64_t t = lo; t < i0 + T; ++t) rows.push_back(t - i0);
    std::vector<Status> finite(1);
    Status s = forward_chunk(experts, {&seq}, {T}, {opt_.expert_top_p}, ids.data() + i0, T, rows,
                             logits->data() + (lo - first_logit) * c.vocab_size, cancel, &finite);
    if (s.ok()) s = finite[0];
    if (!s.ok()) {
      seq.valid = false;
      return s;
    }
  }
  return absl::OkStatus();
}

Status Model::forward_batch(ExpertSource& experts, const std::vector<Piece>& pieces,
                            std::vector<float>* logits, const std::atomic<bool>* cancel,
                            std::vector<Status>* piece_status) {
  const checkpoint::ModelConfig& c = config();
  std::vector<SequenceState*> seqs;
  std::vector<int64_t> lens, rows;
  std::vector<int32_t> ids;
  std::vector<float> top_p;
  for (const Piece& p : pieces) {
    K3_RETURN_IF_ERROR(check_piece(*p.seq, p.ids));
    if (p.expert_top_p != 0.0f && !(p.expert_top_p > 0.0f && p.expert_top_p <= 1.0f))
      return absl::InvalidArgumentError(
          cat("expert_top_p must be in (0, 1], not ", p.expert_top_p));
    top_p.push_back(p.expert_top_p != 0.0f ? p.expert_top_p : opt_.expert_top_p);
    if (std::find(seqs.begin(), seqs.end(), p.seq) != seqs.end())
      return absl::InvalidArgumentError("a sequence appears twice in one batch");
    seqs.push_back(p.seq);
    lens.push_back(static_cast<int64_t>(p.ids.size()));
    ids.insert(ids.end(), p.ids.begin(), p.ids.end());
    if (p.want_logits) rows.push_back(static_cast<int64_t>(ids.size()) - 1);
  }
  if (seqs.empty()) return absl::InvalidArgumentError("empty batch");
  logits->assign(rows.size() * static_cast<size_t>(c.vocab_size), 0.0f);
  std::vector<Status> finite(seqs.size());
  Status s = forward_chunk(experts, seqs, lens, top_p, ids.data(), static_cast<int64_t>(ids.size()),
                           rows, logits->data(), cancel, &finite);
  if (!s.ok()) {
    for (SequenceState* q : seqs) q->valid = false;
    return s;
  }
  for (size_t i = 0; i < seqs.size(); ++i) {
    if (finite[i].ok()) continue;
    seqs[i]->valid = false;
    if (piece_status == nullptr) {
      for (SequenceState* q : seqs) q->valid = false;
      return finite[i];
    }
  }
  if (piece_status != nullptr) *piece_status = std::move(finite);
  return absl::OkStatus();
}

void Model::post_speculative(ExpertSource& experts, int64_t layer,
                             const std::vector<int64_t>& ids) {
  ExpertRequest r;
  r.layer = layer;
  r.priority = ExpertPriority::kSpeculative;
  for (int64_t e : ids)
    if (experts.owns(layer, e)) r.work.push_back({e, false, {}});
  if (r.work.empty()) return;
  spec_.count_posted(r.work.size());
  // A guess that cannot go out (expertd away) is dropped; the demand
  // request reports the problem.
  experts.submit(r).IgnoreError();
}

Status Model::forward_chunk(ExpertSource& experts, const std::vector<SequenceState*>& seqs,
                            const std::vector<int64_t>& lens, const std::vector<float>& top_p,
                            const int32_t* ids, int64_t T, const std::vector<int64_t>& head_rows,
                            float* logits, const std::atomic<bool>* cancel,
                            std::vector<Status>* piece_status) {
  const checkpoint::ModelConfig& c = config();
  const ModelWeights& w = *weights_;
  const int64_t D = c.hidden_size;
  const double eps = c.rms_norm_eps;
  auto t_dense = Clock::now();
  double attn = 0;
  const ExpertSourceStats experts0 = experts.stats();
  const bool any_top_p = std::any_of(top_p.begin(), top_p.end(), [](float p) { return p < 1.0f; });

  // One lane, or two of about equal rows (whole pieces each).
  const size_t n_lanes = opt_.sequence_groups >= 2 && seqs.size() >= 2 ? 2 : 1;
  std::vector<Lane> lanes(n_lanes);
  {
    size_t split = seqs.size();  // lane A: pieces [0, split)
    if (n_lanes == 2) {
      split = 1;
      int64_t rows = lens[0];
      while (split + 1 < seqs.size() && rows + lens[split] <= T / 2) rows += lens[split++];
    }
    int64_t row = 0;
    for (size_t i = 0; i < seqs.size(); ++i) {
      Lane& ln = lanes[n_lanes == 2 && i >= split ? 1 : 0];
      if (ln.seqs.empty()) {
        ln.first_piece = i;
        ln.row0 = row;
      }
      ln.seqs.push_back(seqs[i]);
      ln.lens.push_back(lens[i]);
      ln.T += lens[i];
      if (any_top_p) ln.row_top_p.insert(ln.row_top_p.end(), lens[i], top_p[i]);
      row += lens[i];
    }
  }
  const LaneLayers layers(w, &attn);
  for (Lane& ln : lanes) layers.start(ln, ids + ln.row0);
  // Layer l up to its MoE/FFN input (ln.xn).
  auto attend = [&](Lane& ln, int64_t l) {
    layers.begin_layer(ln, l);
    layers.attend(ln, l, 0, ln.T);
  };
  // A MoE layer's routed request goes out.
  auto submit = [&](Lane& ln, int64_t l, const MoeStep& step) -> Status {
    if (!w.layers[l].moe) return absl::OkStatus();
    K3_ASSIGN_OR_RETURN(ln.pending, moe_submit(c, w.layers[l].moe_w, l, experts, opt_.int8_experts,
                                               ln.xn.data(), ln.T, step));
    return absl::OkStatus();
  };
  // The layer's MoE (its rows awaited) or FFN, added to the stream.
  auto finish = [&](Lane& ln, int64_t l) -> Status {
    const LayerWeights& lw = w.layers[l];
    if (lw.moe)
      K3_RETURN_IF_ERROR(moe_finish(c, lw.moe_w, experts, std::move(ln.pending), ln.sub.data()));
    else
      layers.ffn(ln, l, 0, ln.T);
    layers.end_rows(ln, l, 0, ln.T, piece_status);
    return absl::OkStatus();
  };
  auto step_for = [&](Lane& ln, std::vector<int64_t>* used) {
    MoeStep step;
    step.top_p = ln.row_top_p.empty() ? nullptr : ln.row_top_p.data();
    step.used = used;
    step.pruned = &times_.experts_pruned;
    return step;
  };
  auto cancelled = [&](int64_t l) -> Status {
    // Between layers: a cancelled request stops here (the caller drops the
    // half-updated state).
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed))
      return absl::CancelledError(cat("cancelled before layer ", l));
    return absl::OkStatus();
  };

  const int64_t L = c.num_hidden_layers;
  if (n_lanes == 1) {
    Lane& ln = lanes[0];
    std::vector<int64_t> used;
    std::vector<float> look;  // speculation input (1): the layer output, normalised
    for (int64_t l = 0; l < L; ++l) {
      K3_RETURN_IF_ERROR(cancelled(l));
      attend(ln, l);
      // Speculation for the next layer when it is a MoE one: input (0) is
      // this layer's MoE/FFN input, posted right behind this layer's demand
      // request (or now, before a dense FFN).
      const bool look_ahead =
          spec_.predicting() && l + 1 < L && w.layers[static_cast<size_t>(l + 1)].moe;
      bool post_a = false;
      std::vector<int64_t> guess_a;
      if (look_ahead) {
        guess_a = predict_experts(c, w.layers[static_cast<size_t>(l + 1)].moe_w, ln.xn.data(), T);
        post_a = spec_.predict(0, l + 1, guess_a);
      }
      if (w.layers[l].moe) {
        K3_RETURN_IF_ERROR(submit(ln, l, step_for(ln, &used)));
        if (post_a) post_speculative(experts, l + 1, guess_a);
        K3_RETURN_IF_ERROR(finish(ln, l));
        spec_.observe(l, used);
      } else {
        if (post_a) post_speculative(experts, l + 1, guess_a);
        K3_RETURN_IF_ERROR(finish(ln, l));
      }
      // Input (1): this layer's output, before the next layer's AttnRes mix.
      if (look_ahead) {
        const LayerWeights& nw = w.layers[static_cast<size_t>(l + 1)];
        look.resize(static_cast<size_t>(T * D));
        for (int64_t t = 0; t < T; ++t)
          rms_norm(ln.stream.data() + t * D, nw.post_norm.data(), eps, D, look.data() + t * D);
        const std::vector<int64_t> guess_b = predict_experts(c, nw.moe_w, look.data(), T);
        if (spec_.predict(1, l + 1, guess_b)) post_speculative(experts, l + 1, guess_b);
      }
    }
  } else {
    // Two groups, A half a layer ahead of B, one demand request in flight:
    // B's attention runs while A's experts are read, A's next attention
    // while B's are. An expert both need is read once (still cached for B).
    // No speculation here: the other group's reads keep the drive busy.
    Lane& a = lanes[0];
    Lane& b = lanes[1];
    attend(a, 0);
    K3_RETURN_IF_ERROR(submit(a, 0, step_for(a, nullptr)));
    for (int64_t l = 0; l < L; ++l) {
      attend(b, l);
      K3_RETURN_IF_ERROR(finish(a, l));
      K3_RETURN_IF_ERROR(submit(b, l, step_for(b, nullptr)));
      if (l + 1 < L) {
        K3_RETURN_IF_ERROR(cancelled(l + 1));
        attend(a, l + 1);
      }
      K3_RETURN_IF_ERROR(finish(b, l));
      if (l + 1 < L) K3_RETURN_IF_ERROR(submit(a, l + 1, step_for(a, nullptr)));
    }
  }
  for (size_t i = 0; i < seqs.size(); ++i) seqs[i]->position += lens[i];

  // Head on the requested tokens (rows of the chunk: find each one's lane).
  const int64_t n_logits = static_cast<int64_t>(head_rows.size());
  if (n_logits > 0) {
    std::vector<float> hn(n_logits * D);
    for (int64_t r = 0; r < n_logits; ++r) {
      const int64_t t = head_rows[static_cast<size_t>(r)];
      Lane& ln = lanes[n_lanes == 2 && t >= lanes[1].row0 ? 1 : 0];
      layers.head_input(ln, t - ln.row0, hn.data() + r * D);
    }
    linear(w.lm_head, hn.data(), n_logits, logits);  // {n_logits, V}
    for (int64_t r = 0; r < n_logits; ++r) {
      // The piece of head row t: rows are the pieces' tokens back to back.
      const int64_t t = head_rows[static_cast<size_t>(r)];
      size_t piece = 0;
      for (int64_t off = 0; piece < seqs.size() && off + lens[piece] <= t; ++piece)
        off += lens[piece];
      if (piece >= seqs.size() || !(*piece_status)[piece].ok()) continue;
      const float* x = logits + r * c.vocab_size;
      for (int64_t k = 0; k < c.vocab_size; ++k)
        if (!std::isfinite(x[k])) {
          (*piece_status)[piece] = absl::DataLossError(
              "non-finite logits (a corrupt lm_head? k3ctl verify checks the checkpoint)");
          break;
        }
    }
  }
  const ExpertSourceStats experts1 = experts.stats();
  const double wait = experts1.wait_seconds - experts0.wait_seconds;
  const double expert_compute = experts1.compute_seconds - experts0.compute_seconds;
  times_.attention_seconds += attn;
  times_.expert_compute_seconds += expert_compute;
  times_.expert_wait_seconds += wait;
  times_.dense_seconds += seconds_since(t_dense) - attn - expert_compute - wait;
  times_.tokens += T;
  spec_.end_chunk(T, &experts, experts1, c.expert_bytes(), experts.reads_use_host_cores());
  return absl::OkStatus();
}

}  // namespace k3::engined
