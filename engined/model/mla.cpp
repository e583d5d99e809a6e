#include <cmath>
#include <vector>

#include "engined/model/layers.h"
#include "engined/model/ops.h"
#include "engined/model/parallel.h"

namespace k3::engined {

void mla_forward(const checkpoint::ModelConfig& c, const MlaWeights& w, MlaCache& cache,
                 int64_t pos0, const float* x, int64_t T, float* out) {
  const int64_t H = c.num_attention_heads, nope = c.qk_nope_head_dim, rope = c.qk_rope_head_dim;
  const int64_t vd = c.v_head_dim, lora = c.kv_lora_rank, qd = nope + rope;
  const int64_t qlora = c.q_lora_rank;
  // Latent norms use eps 1e-6 (the module default), not rms_norm_eps.
  constexpr double kLatentEps = 1e-6;
  std::vector<float> cq(T * qlora), q(T * H * qd), ckv(T * (lora + rope)), gate(T * H * vd);
  linear(w.q_a, x, T, cq.data());  // {T, q_lora}
  for (int64_t t = 0; t < T; ++t)
    rms_norm(cq.data() + t * qlora, w.q_a_norm.data(), kLatentEps, qlora, cq.data() + t * qlora);
  linear(w.q_b, cq.data(), T, q.data());  // {T, H, nope + rope}
  linear(w.kv_a, x, T, ckv.data());       // {T, kv_lora + rope}
  linear(w.g, x, T, gate.data());         // {T, H * v}
  // Append the chunk to the cache: ckv normalized, k_r raw.
  cache.ckv.resize(static_cast<size_t>((pos0 + T) * lora));
  cache.k_r.resize(static_cast<size_t>((pos0 + T) * rope));
  for (int64_t t = 0; t < T; ++t) {
    const float* row = ckv.data() + t * (lora + rope);
    rms_norm(row, w.kv_a_norm.data(), kLatentEps, lora, cache.ckv.data() + (pos0 + t) * lora);
    for (int64_t i = 0; i < rope; ++i) cache.k_r[(pos0 + t) * rope + i] = row[lora + i];
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(qd));
  std::vector<float> o(T * H * vd);
  for (int64_t t = 0; t < T; ++t) {
    const int64_t n = pos0 + t + 1;  // causal: positions 0..pos0+t
    parallel_rows(H, n * (lora + rope) + (nope + vd) * lora, [&](int64_t h0, int64_t h1) {
      std::vector<float> q_lat(lora), o_lat(lora), p(n);
      for (int64_t h = h0; h < h1; ++h) {
        const float* qn = q.data() + (t * H + h) * qd;  // [q_nope | q_r]
        const float* qr = qn + nope;
        // Absorb W_kb (rows h*(nope+v) .. +nope of kv_b) into the query:
        // q_lat = W_kb^T q_nope, so q_nope . k_nope(s) = q_lat . ckv(s).
        const float* wk = w.kv_b.data() + h * (nope + vd) * lora;
        for (int64_t i = 0; i < lora; ++i) q_lat[i] = 0.0f;
        for (int64_t r = 0; r < nope; ++r) {
          const float a = qn[r];
          const float* wr = wk + r * lora;
          for (int64_t i = 0; i < lora; ++i) q_lat[i] += a * wr[i];
        }
        float mx = -INFINITY;
        for (int64_t s = 0; s < n; ++s) {
          const float* cs = cache.ckv.data() + s * lora;
          const float* ks = cache.k_r.data() + s * rope;
          float sc = 0.0f;
          for (int64_t i = 0; i < lora; ++i) sc += q_lat[i] * cs[i];
          for (int64_t i = 0; i < rope; ++i) sc += qr[i] * ks[i];
          p[s] = sc * scale;
          mx = std::fmax(mx, p[s]);
        }
        double sum = 0.0;
        for (int64_t s = 0; s < n; ++s) {
          p[s] = std::exp(p[s] - mx);
          sum += p[s];
        }
        const float inv = static_cast<float>(1.0 / sum);
        for (int64_t i = 0; i < lora; ++i) o_lat[i] = 0.0f;
        for (int64_t s = 0; s < n; ++s) {
          const float ps = p[s] * inv;
          const float* cs = cache.ckv.data() + s * lora;
          for (int64_t i = 0; i < lora; ++i) o_lat[i] += ps * cs[i];
        }
        // Output side: v_h = W_vb o_lat (rows h*(nope+v)+nope ..), then the gate.
        const float* wv = wk + nope * lora;
        float* oh = o.data() + (t * H + h) * vd;
        const float* gh = gate.data() + (t * H + h) * vd;
        for (int64_t j = 0; j < vd; ++j) {
          const float* wr = wv + j * lora;
          float acc = 0.0f;
          for (int64_t i = 0; i < lora; ++i) acc += wr[i] * o_lat[i];
          oh[j] = acc * kernels::sigmoid(gh[j]);
        }
      }
    });
  }
  linear(w.o, o.data(), T, out);  // {T, D}
}

}  // namespace k3::engined
