#include <algorithm>
#include <map>
#include <numeric>
#include <vector>

#include "engined/model/layers.h"
#include "engined/model/ops.h"
#include "engined/model/parallel.h"
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
  for (int64_t i = 0; i < T * I; ++i) g[i] = kernels::situ(g[i], u[i], b1, b2);
  linear(w.down, g.data(), T, out);  // {T, D}
}

struct MoePending {
  int64_t layer = 0, T = 0;
  const float* x = nullptr;
  std::map<int64_t, std::vector<std::pair<int64_t, int64_t>>> users;  // expert -> (t, slot)
  std::vector<float> wts;
  std::vector<int64_t> kt;
  std::vector<float> z;
  std::vector<int8_t> zq;
  std::vector<float> zs;
  experts::ExpertActivations act;  // points into z / zq / zs: the struct never moves
  experts::ExpertRequest req;
};

void MoePendingDeleter::operator()(MoePending* p) const {
  delete p;
}

StatusOr<MoeInFlight> moe_submit(const checkpoint::ModelConfig& c, const MoeWeights& w,
                                 int64_t layer, experts::ExpertSource& src, bool int8_experts,
                                 const float* x, int64_t T, const MoeStep& step) {
  const int64_t E = c.num_experts, K = c.num_experts_per_token;
  const int64_t lat = c.routed_expert_hidden_size;
  MoeInFlight p(new MoePending);
  p->layer = layer;
  p->T = T;
  p->x = x;

  // Routing: s = sigma(W_router x) in f32; top-k on s + bias; weights are the
  // raw scores renormalized over the selection.
  std::vector<float> s(T * E);
  linear(w.router, x, T, s.data());  // {T, E}
  for (float& v : s) v = kernels::sigmoid(v);
  // With top-p a token keeps kt[t] <= K of them (renormalised over those).
  std::vector<std::vector<int64_t>> sel(static_cast<size_t>(T));
  p->wts.resize(static_cast<size_t>(T * K));
  p->kt.assign(static_cast<size_t>(T), K);
  for (int64_t t = 0; t < T; ++t) {
    select_experts(s.data() + t * E, w.bias.data(), E, K, &sel[t]);
    if (step.top_p != nullptr && step.top_p[t] < 1.0f) {
      prune_top_p(s.data() + t * E, step.top_p[t], &sel[t]);
      p->kt[t] = static_cast<int64_t>(sel[t].size());
      if (step.pruned != nullptr) *step.pruned += static_cast<uint64_t>(K - p->kt[t]);
    }
    double sum = 0.0;
    for (int64_t j = 0; j < p->kt[t]; ++j) sum += s[t * E + sel[t][j]];
    for (int64_t j = 0; j < p->kt[t]; ++j)
      p->wts[t * K + j] = static_cast<float>(s[t * E + sel[t][j]] / sum * c.routed_scaling_factor);
    for (int64_t j = 0; j < p->kt[t]; ++j) p->users[sel[t][j]].push_back({t, j});
  }
  if (step.used != nullptr) {
    step.used->clear();
    for (const auto& [e, us] : p->users) step.used->push_back(e);  // sorted (a map)
  }

  p->z.resize(static_cast<size_t>(T * lat));
  linear(w.lat_down, x, T, p->z.data());  // {T, latent}
  experts::ExpertActivations& act = p->act;
  act.tokens = T;
  act.int8 = int8_experts;
  if (int8_experts) {
    p->zq.resize(static_cast<size_t>(T * lat));
    p->zs.resize(static_cast<size_t>(T * lat / 32));
    for (int64_t t = 0; t < T; ++t)
      kernels::quantize_q8_32(p->z.data() + t * lat, lat, p->zq.data() + t * lat,
                              p->zs.data() + t * lat / 32);
    act.q = p->zq.data();
    act.q_scales = p->zs.data();
  } else {
    act.f32 = p->z.data();
  }

  // One request for the layer: each distinct expert of the chunk computes
  // the rows of the tokens that chose it. It goes out before the shared
  // experts run, so their compute overlaps the reads.
  p->req.layer = layer;
  p->req.activations = &p->act;
  for (const auto& [e, us] : p->users) {
    experts::ExpertWork wk;
    wk.expert = e;
    wk.compute = true;
    for (const auto& [t, slot] : us) wk.rows.push_back(t);
    p->req.work.push_back(std::move(wk));
  }
  K3_RETURN_IF_ERROR(src.submit(p->req));
  return p;
}

Status moe_finish(const checkpoint::ModelConfig& c, const MoeWeights& w, experts::ExpertSource& src,
                  MoeInFlight pending, float* out) {
  MoePending& p = *pending;
  const int64_t D = c.hidden_size, K = c.num_experts_per_token, T = p.T, layer = p.layer;
  const int64_t lat = c.routed_expert_hidden_size;
  const float b1 = static_cast<float>(c.activation_situ_beta);
  const float b2 = static_cast<float>(c.activation_situ_linear_beta);
  const float* x = p.x;

  // Shared experts, while routed experts are in flight: {T, D}.
  std::vector<float> sd;
  if (w.has_shared) {
    const int64_t S = w.sh_gate.rows();
    std::vector<float> sg(T * S), su(T * S);
    sd.resize(static_cast<size_t>(T * D));
    linear(w.sh_gate, x, T, sg.data());  // {T, S}
    linear(w.sh_up, x, T, su.data());
    for (int64_t i = 0; i < T * S; ++i) sg[i] = kernels::situ(sg[i], su[i], b1, b2);
    linear(w.sh_down, sg.data(), T, sd.data());  // {T, D}
  }

  // Outputs land in y[t][slot] as they arrive and are summed in slot order
  // afterwards, so arrival order never changes the result.
  std::vector<float> y(T * K * lat);
  for (size_t n = 0; n < p.req.work.size(); ++n) {
    K3_ASSIGN_OR_RETURN(experts::ExpertCompletion done, src.next());
    if (done.index >= p.req.work.size() ||
        done.rows.size() != p.req.work[done.index].rows.size() * static_cast<size_t>(lat))
      return absl::InternalError(
          cat("expert source returned a malformed completion for layer ", layer));
    const auto& us = p.users[p.req.work[done.index].expert];
    for (size_t r = 0; r < us.size(); ++r) {
      const auto [t, slot] = us[r];
      std::copy_n(done.rows.data() + r * lat, lat, y.data() + (t * K + slot) * lat);
    }
  }

  // u = sum_j w_j y_j, RMSNorm in the latent space, back up to D.
  std::vector<float> agg(T * lat, 0.0f);
  for (int64_t t = 0; t < T; ++t) {
    float* a = agg.data() + t * lat;
    for (int64_t j = 0; j < p.kt[t]; ++j) {
      const float wj = p.wts[t * K + j];
      const float* yj = y.data() + (t * K + j) * lat;
      for (int64_t i = 0; i < lat; ++i) a[i] += wj * yj[i];
    }
    rms_norm(a, w.lat_norm.data(), c.rms_norm_eps, lat, a);
  }
  linear(w.lat_up, agg.data(), T, out);  // {T, D}
  if (w.has_shared)
    for (int64_t i = 0; i < T * D; ++i) out[i] += sd[i];
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
