#include "engined/model/lane.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstring>

#include "engined/model/ops.h"

namespace k3::engined {

void LaneLayers::start(Lane& ln, const int32_t* ids) const {
  const int64_t D = w_.config.hidden_size;
  for (auto* v : {&ln.stream, &ln.acc, &ln.a_in, &ln.xn, &ln.sub})
    v->resize(static_cast<size_t>(ln.T * D));
  for (int64_t t = 0; t < ln.T; ++t) w_.embed_row(ids[t], ln.stream.data() + t * D);
}

void LaneLayers::mix(const Lane& ln, size_t n_bank, const float* v, int64_t t,
                     const std::vector<float>& sw, float* out) const {
  const int64_t D = w_.config.hidden_size;
  thread_local std::vector<const float*> rows;
  rows.clear();
  for (size_t e = 0; e < n_bank; ++e) rows.push_back(ln.bank[e].data() + t * D);
  attn_res_mix(v, rows.data(), static_cast<int>(rows.size()), sw.data(), w_.config.rms_norm_eps, D,
               out);
}

void LaneLayers::begin_layer(Lane& ln, int64_t l) const {
  ln.snapshot_this_layer = l % w_.config.attn_res_block_size == 0;
  if (ln.snapshot_this_layer) {
    ln.bank.push_back(ln.stream);
    std::fill(ln.acc.begin(), ln.acc.end(), 0.0f);
  } else {
    ln.acc = ln.stream;
  }
}

void LaneLayers::attend(Lane& ln, int64_t l, int64_t r0, int64_t r1) const {
  const checkpoint::ModelConfig& c = w_.config;
  const LayerWeights& lw = w_.layers[static_cast<size_t>(l)];
  const int64_t D = c.hidden_size;
  const double eps = c.rms_norm_eps;
  // a_in = mix(incoming, bank before this layer's snapshot) (the incoming
  // stream itself while that bank is empty).
  const size_t before = ln.bank.size() - (ln.snapshot_this_layer ? 1 : 0);
  for (int64_t t = r0; t < r1; ++t) {
    if (before == 0)
      std::memcpy(ln.a_in.data() + t * D, ln.stream.data() + t * D, D * sizeof(float));
    else
      mix(ln, before, ln.stream.data() + t * D, t, lw.asw, ln.a_in.data() + t * D);
    rms_norm(ln.a_in.data() + t * D, lw.in_norm.data(), eps, D, ln.xn.data() + t * D);
  }
  const auto t_attn = std::chrono::steady_clock::now();
  // Attention is the only part that reads a sequence's history: per piece,
  // its rows in [r0, r1) at their positions.
  for (size_t i = 0, off = 0; i < ln.seqs.size(); off += static_cast<size_t>(ln.lens[i]), ++i) {
    const int64_t a = std::max<int64_t>(r0, static_cast<int64_t>(off));
    const int64_t b = std::min<int64_t>(r1, static_cast<int64_t>(off) + ln.lens[i]);
    if (a >= b) continue;
    SequenceState& seq = *ln.seqs[i];
    const float* x = ln.xn.data() + a * D;
    float* y = ln.sub.data() + a * D;
    if (lw.kda)
      kda_forward(c, lw.kda_w, seq.kda[static_cast<size_t>(l)], x, b - a, y);
    else
      mla_forward(c, lw.mla_w, seq.mla[static_cast<size_t>(l)],
                  seq.position + (a - static_cast<int64_t>(off)), x, b - a, y);
  }
  *attention_seconds_ +=
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_attn).count();
  for (int64_t i = r0 * D; i < r1 * D; ++i) ln.acc[i] += ln.sub[i];
  // f_in = mix(acc, bank) (the bank includes this layer's snapshot if taken).
  for (int64_t t = r0; t < r1; ++t) {
    mix(ln, ln.bank.size(), ln.acc.data() + t * D, t, lw.msw, ln.a_in.data() + t * D);
    rms_norm(ln.a_in.data() + t * D, lw.post_norm.data(), eps, D, ln.xn.data() + t * D);
  }
}

void LaneLayers::ffn(Lane& ln, int64_t l, int64_t r0, int64_t r1) const {
  const int64_t D = w_.config.hidden_size;
  ffn_forward(w_.config, w_.layers[static_cast<size_t>(l)].ffn, ln.xn.data() + r0 * D, r1 - r0,
              ln.sub.data() + r0 * D);
}

void LaneLayers::end_rows(Lane& ln, int64_t l, int64_t r0, int64_t r1,
                          std::vector<Status>* piece_status) const {
  const int64_t D = w_.config.hidden_size;
  for (int64_t i = r0 * D; i < r1 * D; ++i) ln.stream[i] = ln.acc[i] + ln.sub[i];
  for (size_t i = 0, off = 0; i < ln.seqs.size(); off += static_cast<size_t>(ln.lens[i]), ++i) {
    const int64_t a = std::max<int64_t>(r0, static_cast<int64_t>(off));
    const int64_t b = std::min<int64_t>(r1, static_cast<int64_t>(off) + ln.lens[i]);
    Status& st = (*piece_status)[ln.first_piece + i];
    if (a >= b || !st.ok()) continue;
    const float* x = ln.stream.data() + a * D;
    for (int64_t k = 0; k < (b - a) * D; ++k)
      if (!std::isfinite(x[k])) {
        st = absl::DataLossError(cat("non-finite hidden state after layer ", l,
                                     " (a corrupt weight? k3ctl verify checks the checkpoint)"));
        break;
      }
  }
}

void LaneLayers::head_input(Lane& ln, int64_t t, float* out) const {
  const int64_t D = w_.config.hidden_size;
  mix(ln, ln.bank.size(), ln.stream.data() + t * D, t, w_.out_sw, ln.a_in.data() + t * D);
  rms_norm(ln.a_in.data() + t * D, w_.final_norm.data(), w_.config.rms_norm_eps, D, out);
}

}  // namespace k3::engined
