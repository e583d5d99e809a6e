#include "engined/experts/expert_compute.h"

#include "engined/model/ops.h"
#include "engined/model/parallel.h"
#include "shared/kernels/mxfp4.h"

namespace k3::engine {

ExpertShape ExpertShape::of(const ModelConfig& c) {
  ExpertShape s;
  s.num_layers = c.num_hidden_layers;
  s.first_moe_layer = c.first_k_dense_replace;
  s.num_experts = c.num_experts;
  s.latent = c.routed_expert_hidden_size;
  s.intermediate = c.moe_intermediate_size;
  s.situ_beta = static_cast<float>(c.activation_situ_beta);
  s.situ_linear_beta = static_cast<float>(c.activation_situ_linear_beta);
  s.layout = ExpertIndex::layout_for(c);
  s.bytes = c.expert_bytes();
  return s;
}

void compute_expert_rows(const ExpertShape& shape, const uint8_t* data,
                         const ExpertActivations& act, const std::vector<int64_t>& rows,
                         float* out) {
  const int64_t lat = shape.latent, I = shape.intermediate;
  const float b1 = shape.situ_beta, b2 = shape.situ_linear_beta;
  const ExpertLayout& lay = shape.layout;
  const kernels::Mxfp4Matrix w1{data + lay.offset[0], data + lay.offset[1], I, lat};
  const kernels::Mxfp4Matrix w2{data + lay.offset[2], data + lay.offset[3], lat, I};
  const kernels::Mxfp4Matrix w3{data + lay.offset[4], data + lay.offset[5], I, lat};
  std::vector<float> g(I), u(I);
  std::vector<int8_t> hq(act.int8 ? I : 0);
  std::vector<float> hs(act.int8 ? I / 32 : 0);
  for (size_t i = 0; i < rows.size(); ++i) {
    const int64_t t = rows[i];
    float* yt = out + static_cast<int64_t>(i) * lat;  // {latent}
    if (act.int8) {
      const int8_t* xq = act.q + t * lat;
      const float* xs = act.q_scales + t * lat / 32;
      parallel_rows(I, 2 * lat, [&](int64_t r0, int64_t r1) {
        kernels::mxfp4_matvec_q8(w1, xq, xs, g.data(), r0, r1);
        kernels::mxfp4_matvec_q8(w3, xq, xs, u.data(), r0, r1);
      });
      for (int64_t r = 0; r < I; ++r) g[r] = situ(g[r], u[r], b1, b2);
      kernels::quantize_q8_32(g.data(), I, hq.data(), hs.data());
      parallel_rows(lat, I, [&](int64_t r0, int64_t r1) {
        kernels::mxfp4_matvec_q8(w2, hq.data(), hs.data(), yt, r0, r1);
      });
    } else {
      const float* zt = act.f32 + t * lat;
      parallel_rows(I, 2 * lat, [&](int64_t r0, int64_t r1) {
        kernels::mxfp4_matvec_f32(w1, zt, g.data(), r0, r1);
        kernels::mxfp4_matvec_f32(w3, zt, u.data(), r0, r1);
      });
      for (int64_t r = 0; r < I; ++r) g[r] = situ(g[r], u[r], b1, b2);
      parallel_rows(lat, I, [&](int64_t r0, int64_t r1) {
        kernels::mxfp4_matvec_f32(w2, g.data(), yt, r0, r1);
      });
    }
  }
}

}  // namespace k3::engine
