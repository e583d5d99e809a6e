#include "shared/experts/expert_compute.h"

#include <algorithm>

#include "shared/kernels/activations.h"
#include "shared/kernels/mxfp4.h"
#include "shared/kernels/parallel_rows.h"

namespace k3::experts {

ExpertShape ExpertShape::of(const checkpoint::ModelConfig& c) {
  ExpertShape s;
  s.num_layers = c.num_hidden_layers;
  s.first_moe_layer = c.first_k_dense_replace;
  s.num_experts = c.num_experts;
  s.latent = c.routed_expert_hidden_size;
  s.intermediate = c.moe_intermediate_size;
  s.situ_beta = static_cast<float>(c.activation_situ_beta);
  s.situ_linear_beta = static_cast<float>(c.activation_situ_linear_beta);
  s.layout = checkpoint::ExpertIndex::layout_for(c);
  s.bytes = c.expert_bytes();
  return s;
}

void compute_expert_rows(const ExpertShape& shape, const uint8_t* data,
                         const ExpertActivations& act, const std::vector<int64_t>& rows,
                         float* out) {
  const int64_t n = static_cast<int64_t>(rows.size());
  if (n == 0) return;
  const int64_t lat = shape.latent, I = shape.intermediate;
  const float b1 = shape.situ_beta, b2 = shape.situ_linear_beta;
  const checkpoint::ExpertLayout& lay = shape.layout;
  const kernels::Mxfp4Matrix w1{data + lay.offset[0], data + lay.offset[1], I, lat};
  const kernels::Mxfp4Matrix w2{data + lay.offset[2], data + lay.offset[3], lat, I};
  const kernels::Mxfp4Matrix w3{data + lay.offset[4], data + lay.offset[5], I, lat};
  // All the expert's token rows in one batched pass per matrix: each weight
  // block is decoded once for several tokens, and every result has the bits
  // of the per-token matvec (shared/kernels/mxfp4.h), so batching changes no
  // output bit (the chunked-prefill tests compare with token-at-a-time).
  std::vector<float> g(static_cast<size_t>(n * I)), u(static_cast<size_t>(n * I));  // {n, I}
  if (act.int8) {
    std::vector<int8_t> xq(static_cast<size_t>(n * lat));      // {n, latent}
    std::vector<float> xs(static_cast<size_t>(n * lat / 32));  // {n, latent / 32}
    for (int64_t i = 0; i < n; ++i) {
      std::copy_n(act.q + rows[static_cast<size_t>(i)] * lat, lat, xq.data() + i * lat);
      std::copy_n(act.q_scales + rows[static_cast<size_t>(i)] * lat / 32, lat / 32,
                  xs.data() + i * lat / 32);
    }
    kernels::parallel_rows(I, 2 * lat * n, n, [&](int64_t r0, int64_t r1) {
      kernels::mxfp4_matmul_q8(w1, xq.data(), lat, xs.data(), lat / 32, n, g.data(), I, r0, r1);
      kernels::mxfp4_matmul_q8(w3, xq.data(), lat, xs.data(), lat / 32, n, u.data(), I, r0, r1);
    });
    std::vector<int8_t> hq(static_cast<size_t>(n * I));      // {n, I}
    std::vector<float> hs(static_cast<size_t>(n * I / 32));  // {n, I / 32}
    for (int64_t i = 0; i < n; ++i) {
      float* gi = g.data() + i * I;
      kernels::situ_rows(gi, u.data() + i * I, I, b1, b2, gi);
      kernels::quantize_q8_32(gi, I, hq.data() + i * I, hs.data() + i * I / 32);
    }
    kernels::parallel_rows(lat, I * n, n, [&](int64_t r0, int64_t r1) {
      kernels::mxfp4_matmul_q8(w2, hq.data(), I, hs.data(), I / 32, n, out, lat, r0, r1);
    });
  } else {
    std::vector<float> x(static_cast<size_t>(n * lat));  // {n, latent}
    for (int64_t i = 0; i < n; ++i)
      std::copy_n(act.f32 + rows[static_cast<size_t>(i)] * lat, lat, x.data() + i * lat);
    kernels::parallel_rows(I, 2 * lat * n, n, [&](int64_t r0, int64_t r1) {
      kernels::mxfp4_matmul_f32(w1, x.data(), lat, n, g.data(), I, r0, r1);
      kernels::mxfp4_matmul_f32(w3, x.data(), lat, n, u.data(), I, r0, r1);
    });
    kernels::situ_rows(g.data(), u.data(), n * I, b1, b2, g.data());
    kernels::parallel_rows(lat, I * n, n, [&](int64_t r0, int64_t r1) {
      kernels::mxfp4_matmul_f32(w2, g.data(), I, n, out, lat, r0, r1);
    });
  }
}

}  // namespace k3::experts
