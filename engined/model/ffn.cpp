#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include "engined/model/layers.h"
#include "engined/model/ops.h"
#include "engined/model/parallel.h"
#include "shared/base/huge_pages.h"
#include "shared/kernels/mxfp4.h"

namespace k3::engined {
namespace {

// Top-k of the biased scores; ties go to the lower expert id.
void select_experts(const float* score, const float* bias, int64_t E, int64_t k,
                    std::vector<int64_t>* sel) {
  sel->resize(static_cast<size_t>(E));
  std::iota(sel->begin(), sel->end(), 0);
  std::partial_sort(sel->begin(), sel->begin() + k, sel->end(), [&](int64_t a, int64_t b) {
    const float sa = score[a] + bias[a], sb = score[b] + bias[b];
    return sa != sb ? sa > sb : a < b;
  });
  sel->resize(static_cast<size_t>(k));
}

// Top-p over one token's selection (K3_MODEL.md routing, issue 11 item 5):
// experts in descending raw score (ties to the lower id), kept until their
// share of the selection's total reaches p, the crossing one included, at
// least one. The kept ones stay in that order.
void prune_top_p(const float* score, float p, std::vector<int64_t>* sel) {
  std::stable_sort(sel->begin(), sel->end(), [&](int64_t a, int64_t b) {
    return score[a] != score[b] ? score[a] > score[b] : a < b;
  });
  double sum = 0.0;
  for (int64_t e : *sel) sum += score[e];
  double cum = 0.0;
  size_t keep = 0;
  while (keep < sel->size()) {
    cum += score[(*sel)[keep]] / sum;
    ++keep;
    if (cum >= p) break;
  }
  sel->resize(std::max<size_t>(keep, 1));
}

}  // namespace

std::vector<int64_t> top_p_selection(const float* score, const float* bias, int64_t E, int64_t k,
                                     float p) {
  std::vector<int64_t> sel;
  select_experts(score, bias, E, k, &sel);
  if (p < 1.0f) prune_top_p(score, p, &sel);
  return sel;
}

std::vector<int64_t> predict_experts(const checkpoint::ModelConfig& c, const MoeWeights& w,
                                     const float* x, int64_t T) {
  const int64_t E = c.num_experts, K = c.num_experts_per_token;
  std::vector<float> s(T * E);
  linear(w.router, x, T, s.data());  // {T, E}; sigmoid is monotone: top-k on s + bias needs it
  for (float& v : s) v = kernels::sigmoid(v);
  std::vector<bool> chosen(static_cast<size_t>(E), false);
  std::vector<int64_t> sel;
  for (int64_t t = 0; t < T; ++t) {
    select_experts(s.data() + t * E, w.bias.data(), E, K, &sel);
    for (int64_t e : sel) chosen[static_cast<size_t>(e)] = true;
  }
  std::vector<int64_t> out;
  for (int64_t e = 0; e < E; ++e)
    if (chosen[static_cast<size_t>(e)]) out.push_back(e);
  return out;
}

void ffn_forward(const checkpoint::ModelConfig& c, const FfnWeights& w, const float* x, int64_t T,
                 float* out) {
  const int64_t I = w.gate.rows();
  std::vector<float> g(T * I), u(T * I);
  linear(w.gate, x, T, g.data());  // {T, I}
  linear(w.up, x, T, u.data());
  const float b1 = static_cast<float>(c.activation_situ_beta);
  const float b2 = static_cast<float>(c.activation_situ_linear_beta);
  kernels::situ_rows(g.data(), u.data(), T * I, b1, b2, g.data());
  linear(w.down, g.data(), T, out);  // {T, D}
}

struct MoePending {
  int64_t layer = 0, T = 0;
  const float* x = nullptr;
  std::vector<std::vector<int64_t>> sel;  // per row: its experts, in slot order
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> users;  // expert -> (t, slot)
  std::vector<float> wts;
  std::vector<int64_t> kt;
  // The per-row buffers are left uninitialised: each row is written (by
  // moe_route, moe_shared, moe_collect) before it is read, and a big chunk's
  // (2,048 rows: z 29 MB, the shared rows 59 MB, y 470 MB on the real
  // shapes) would otherwise be faulted in and zeroed at once, in one unit of
  // a pass (0.1 to 2.3 s on a VM, a decoder beside it waiting), rather than
  // row by row as they are written.
  // Huge-page buffers (huge_pages.h) where they are large: faulted in
  // 2 MiB at a time as the rows land.
  base::HugeArray<float> z;  // the latent rows {T, latent}
  base::HugeArray<int8_t> zq;
  base::HugeArray<float> zs;
  base::HugeArray<float> sd;       // the shared experts' rows {T, D}
  base::HugeArray<float> y;        // the routed rows {T, K, latent}, by slot
  experts::ExpertActivations act;  // points into z / zq / zs: the struct never moves
  experts::ExpertRequest req;      // every expert of the step
  experts::ExpertRequest group;    // the part of req in flight: req.work[group0, ...)
  size_t group0 = 0;
};

void MoePendingDeleter::operator()(MoePending* p) const {
  delete p;
}

MoeInFlight moe_begin(const checkpoint::ModelConfig& c, int64_t layer, bool int8_experts,
                      const float* x, int64_t T) {
  const int64_t K = c.num_experts_per_token, lat = c.routed_expert_hidden_size;
  MoeInFlight p(new MoePending);
  p->layer = layer;
  p->T = T;
  p->x = x;
  p->sel.resize(static_cast<size_t>(T));
  p->wts.resize(static_cast<size_t>(T * K));
  p->kt.assign(static_cast<size_t>(T), K);
  p->z = base::HugeArray<float>(static_cast<size_t>(T * lat));
  experts::ExpertActivations& act = p->act;
  act.tokens = T;
  act.int8 = int8_experts;
  if (int8_experts) {
    p->zq = base::HugeArray<int8_t>(static_cast<size_t>(T * lat));
    p->zs = base::HugeArray<float>(static_cast<size_t>(T * lat / 32));
    act.q = p->zq.get();
    act.q_scales = p->zs.get();
  } else {
    act.f32 = p->z.get();
  }
  p->req.layer = layer;
  p->req.activations = &p->act;
  return p;
}

void moe_route(const checkpoint::ModelConfig& c, const MoeWeights& w, MoePending& p, int64_t r0,
               int64_t r1, const MoeStep& step) {
  const int64_t E = c.num_experts, K = c.num_experts_per_token, D = c.hidden_size;
  const int64_t lat = c.routed_expert_hidden_size, n = r1 - r0;
  const float* x = p.x + r0 * D;

  // Routing: s = sigma(W_router x) in f32; top-k on s + bias; weights are the
  // raw scores renormalized over the selection.
  std::vector<float> s(n * E);
  linear(w.router, x, n, s.data());  // {n, E}
  for (float& v : s) v = kernels::sigmoid(v);
  // With top-p a token keeps kt[t] <= K of them (renormalised over those).
  for (int64_t t = r0; t < r1; ++t) {
    const float* st = s.data() + (t - r0) * E;
    std::vector<int64_t>& sel = p.sel[static_cast<size_t>(t)];
    select_experts(st, w.bias.data(), E, K, &sel);
    if (step.top_p != nullptr && step.top_p[t] < 1.0f) {
      prune_top_p(st, step.top_p[t], &sel);
      p.kt[t] = static_cast<int64_t>(sel.size());
      if (step.pruned != nullptr) *step.pruned += static_cast<uint64_t>(K - p.kt[t]);
    }
    double sum = 0.0;
    for (int64_t j = 0; j < p.kt[t]; ++j) sum += st[sel[j]];
    for (int64_t j = 0; j < p.kt[t]; ++j)
      p.wts[t * K + j] = static_cast<float>(st[sel[j]] / sum * c.routed_scaling_factor);
  }

  linear(w.lat_down, x, n, p.z.get() + r0 * lat);  // {n, latent}
  if (p.act.int8)
    for (int64_t t = r0; t < r1; ++t)
      kernels::quantize_q8_32(p.z.get() + t * lat, lat, p.zq.get() + t * lat,
                              p.zs.get() + t * lat / 32);
}

size_t moe_plan(const checkpoint::ModelConfig& c, MoePending& p, std::vector<int64_t>* used) {
  const int64_t K = c.num_experts_per_token, lat = c.routed_expert_hidden_size;
  p.users.clear();
  for (int64_t t = 0; t < p.T; ++t)
    for (int64_t j = 0; j < p.kt[t]; ++j) p.users[p.sel[t][j]].push_back({t, j});
  if (used != nullptr) {
    used->clear();
    for (const auto& [e, us] : p.users) used->push_back(e);  // sorted (a map)
  }
  // Each distinct expert of the chunk computes the rows of the tokens that
  // chose it.
  p.req.work.clear();
  for (const auto& [e, us] : p.users) {
    experts::ExpertWork wk;
    wk.expert = e;
    wk.compute = true;
    for (const auto& [t, slot] : us) wk.rows.push_back(t);
    p.req.work.push_back(std::move(wk));
  }
  p.y = base::HugeArray<float>(static_cast<size_t>(p.T * K * lat));
  return p.req.work.size();
}

Status moe_submit_work(experts::ExpertSource& src, MoePending& p, size_t w0, size_t w1) {
  p.group.layer = p.layer;
  p.group.activations = &p.act;
  p.group.work.assign(p.req.work.begin() + static_cast<std::ptrdiff_t>(w0),
                      p.req.work.begin() + static_cast<std::ptrdiff_t>(w1));
  p.group0 = w0;
  return src.submit(p.group);
}

Status moe_collect(const checkpoint::ModelConfig& c, experts::ExpertSource& src, MoePending& p) {
  const int64_t K = c.num_experts_per_token, lat = c.routed_expert_hidden_size;
  // Outputs land in y[t][slot] as they arrive and are summed in slot order
  // afterwards, so arrival order never changes the result. Each work item
  // completes once (y is not initialised: a slot never written must not be
  // read).
  std::vector<bool> seen(p.group.work.size());
  for (size_t n = 0; n < p.group.work.size(); ++n) {
    K3_ASSIGN_OR_RETURN(experts::ExpertCompletion done, src.next());
    if (done.index >= p.group.work.size() || seen[done.index] ||
        done.rows.size() != p.group.work[done.index].rows.size() * static_cast<size_t>(lat))
      return absl::InternalError(
          cat("expert source returned a malformed completion for layer ", p.layer));
    seen[done.index] = true;
    const auto& us = p.users[p.group.work[done.index].expert];
    for (size_t r = 0; r < us.size(); ++r) {
      const auto [t, slot] = us[r];
      std::copy_n(done.rows.data() + r * lat, lat, p.y.get() + (t * K + slot) * lat);
    }
  }
  p.group.work.clear();
  return absl::OkStatus();
}

void moe_shared(const checkpoint::ModelConfig& c, const MoeWeights& w, MoePending& p, int64_t r0,
                int64_t r1) {
  if (!w.has_shared) return;
  const int64_t D = c.hidden_size, S = w.sh_gate.rows(), n = r1 - r0;
  const float b1 = static_cast<float>(c.activation_situ_beta);
  const float b2 = static_cast<float>(c.activation_situ_linear_beta);
  const float* x = p.x + r0 * D;
  std::vector<float> sg(n * S), su(n * S);
  if (!p.sd) p.sd = base::HugeArray<float>(static_cast<size_t>(p.T * D));
  linear(w.sh_gate, x, n, sg.data());  // {n, S}
  linear(w.sh_up, x, n, su.data());
  kernels::situ_rows(sg.data(), su.data(), n * S, b1, b2, sg.data());
  linear(w.sh_down, sg.data(), n, p.sd.get() + r0 * D);  // {n, D}
}

void moe_combine(const checkpoint::ModelConfig& c, const MoeWeights& w, const MoePending& p,
                 int64_t r0, int64_t r1, float* out) {
  const int64_t D = c.hidden_size, K = c.num_experts_per_token, n = r1 - r0;
  const int64_t lat = c.routed_expert_hidden_size;
  // u = sum_j w_j y_j, RMSNorm in the latent space, back up to D.
  std::vector<float> agg(n * lat, 0.0f);
  for (int64_t t = r0; t < r1; ++t) {
    float* a = agg.data() + (t - r0) * lat;
    for (int64_t j = 0; j < p.kt[t]; ++j) {
      const float wj = p.wts[t * K + j];
      const float* yj = p.y.get() + (t * K + j) * lat;
      for (int64_t i = 0; i < lat; ++i) a[i] += wj * yj[i];
    }
    rms_norm(a, w.lat_norm.data(), c.rms_norm_eps, lat, a);
  }
  float* o = out + r0 * D;
  linear(w.lat_up, agg.data(), n, o);  // {n, D}
  if (w.has_shared)
    for (int64_t i = 0; i < n * D; ++i) o[i] += p.sd[static_cast<size_t>(r0 * D + i)];
}

size_t moe_work_count(const MoePending& p) {
  return p.req.work.size();
}

std::vector<int64_t> moe_work_experts(const MoePending& p, size_t w0, size_t w1) {
  std::vector<int64_t> out;
  for (size_t i = w0; i < w1 && i < p.req.work.size(); ++i) out.push_back(p.req.work[i].expert);
  return out;
}

StatusOr<MoeInFlight> moe_submit(const checkpoint::ModelConfig& c, const MoeWeights& w,
                                 int64_t layer, experts::ExpertSource& src, bool int8_experts,
                                 const float* x, int64_t T, const MoeStep& step) {
  MoeInFlight p = moe_begin(c, layer, int8_experts, x, T);
  moe_route(c, w, *p, 0, T, step);
  const size_t n = moe_plan(c, *p, step.used);
  // One request for the layer. It goes out before the shared experts run,
  // so their compute overlaps the reads.
  K3_RETURN_IF_ERROR(moe_submit_work(src, *p, 0, n));
  return p;
}

Status moe_finish(const checkpoint::ModelConfig& c, const MoeWeights& w, experts::ExpertSource& src,
                  MoeInFlight pending, float* out) {
  MoePending& p = *pending;
  // Shared experts, while routed experts are in flight.
  moe_shared(c, w, p, 0, p.T);
  K3_RETURN_IF_ERROR(moe_collect(c, src, p));
  moe_combine(c, w, p, 0, p.T, out);
  return absl::OkStatus();
}

Status moe_forward(const checkpoint::ModelConfig& c, const MoeWeights& w, int64_t layer,
                   experts::ExpertSource& src, bool int8_experts, const float* x, int64_t T,
                   float* out, const MoeStep& step) {
  K3_ASSIGN_OR_RETURN(MoeInFlight p, moe_submit(c, w, layer, src, int8_experts, x, T, step));
  if (step.after_submit) step.after_submit();
  return moe_finish(c, w, src, std::move(p), out);
}

}  // namespace k3::engined
