#include <algorithm>
#include <cmath>
#include <vector>

#include "engined/model/layers.h"
#include "engined/model/ops.h"
#include "engined/model/parallel.h"
#include "shared/kernels/attention.h"

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
  // Heads in blocks: the attention kernels read each cached row once a block.
  constexpr int64_t kHeadBlock = 8;
  // Tokens in blocks for the absorbed projections (W_kb into the query, W_vb
  // out of the latent): each head's W_kb and W_vb (256 KiB each at the real
  // shapes, 48 MiB for all heads) are read once a block of tokens instead of
  // once a token. The sums are the same kernels' on the same rows, so the
  // bits do not depend on the block.
  constexpr int64_t kTokenBlock = 16;
  std::vector<float> o(T * H * vd);
  const int64_t block = std::min(kTokenBlock, T);  // a decode step's: 1
  std::vector<float> q_lat(H * block * lora);      // [h][token of the block][lora]
  std::vector<float> o_lat(block * H * lora);      // [token of the block][h][lora]
  for (int64_t t0 = 0; t0 < T; t0 += kTokenBlock) {
    const int64_t tb = std::min(kTokenBlock, T - t0);
    // q_lat = W_kb^T q_nope (rows h*(nope+v) .. +nope of kv_b), so q_nope .
    // k_nope(s) = q_lat . ckv(s): each head's rows weighted by the tokens'
    // q_nope, in row order.
    parallel_rows(H, tb * nope * lora, [&](int64_t h0, int64_t h1) {
      for (int64_t h = h0; h < h1; ++h) {
        float* ql = q_lat.data() + h * tb * lora;
        std::fill(ql, ql + tb * lora, 0.0f);
        kernels::attention_weighted_sum(q.data() + (t0 * H + h) * qd, tb, H * qd,
                                        w.kv_b.data() + h * (nope + vd) * lora, nope, lora, ql);
      }
    });
    for (int64_t t = t0; t < t0 + tb; ++t) {
      const int64_t n = pos0 + t + 1;  // causal: positions 0..pos0+t
      parallel_rows(H, n * (lora + rope), [&](int64_t h0, int64_t h1) {
        std::vector<float> p(kHeadBlock * n), p_rope(kHeadBlock * n);
        for (int64_t hb = h0; hb < h1; hb += kHeadBlock) {
          const int64_t nb = std::min(kHeadBlock, h1 - hb);
          // Scores q_lat . ckv(s) + q_r . k_r(s) for the block's heads.
          kernels::attention_scores(q_lat.data() + (hb * tb + t - t0) * lora, nb, tb * lora,
                                    cache.ckv.data(), n, lora, p.data(), n);
          kernels::attention_scores(q.data() + (t * H + hb) * qd + nope, nb, qd, cache.k_r.data(),
                                    n, rope, p_rope.data(), n);
          for (int64_t b = 0; b < nb; ++b) {
            float* pb = p.data() + b * n;
            const float* rb = p_rope.data() + b * n;
            float mx = -INFINITY;
            for (int64_t s = 0; s < n; ++s) {
              pb[s] = (pb[s] + rb[s]) * scale;
              mx = std::fmax(mx, pb[s]);
            }
            double sum = 0.0;
            for (int64_t s = 0; s < n; ++s) {
              pb[s] = std::exp(pb[s] - mx);
              sum += pb[s];
            }
            const float inv = static_cast<float>(1.0 / sum);
            for (int64_t s = 0; s < n; ++s) pb[s] = pb[s] * inv;
          }
          float* ol = o_lat.data() + ((t - t0) * H + hb) * lora;
          std::fill(ol, ol + nb * lora, 0.0f);
          kernels::attention_weighted_sum(p.data(), nb, n, cache.ckv.data(), n, lora, ol);
        }
      });
    }
    // Output side: v_h = W_vb o_lat (rows h*(nope+v)+nope ..), then the gate.
    parallel_rows(H, tb * vd * lora, [&](int64_t h0, int64_t h1) {
      std::vector<float> v(tb * vd);
      for (int64_t h = h0; h < h1; ++h) {
        const float* wv = w.kv_b.data() + (h * (nope + vd) + nope) * lora;
        kernels::attention_scores(o_lat.data() + h * lora, tb, H * lora, wv, vd, lora, v.data(),
                                  vd);
        for (int64_t t = t0; t < t0 + tb; ++t) {
          float* oh = o.data() + (t * H + h) * vd;
          const float* gh = gate.data() + (t * H + h) * vd;
          const float* vt = v.data() + (t - t0) * vd;
          for (int64_t j = 0; j < vd; ++j) oh[j] = vt[j] * kernels::sigmoid(gh[j]);
        }
      }
    });
  }
  linear(w.o, o.data(), T, out);  // {T, D}
}

}  // namespace k3::engined
