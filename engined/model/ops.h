// Small numeric building blocks of the forward pass (K3_MODEL.md notation).
// Plain scalar code the compiler vectorizes; no OpenMP inside.
#pragma once

#include <cmath>
#include <cstdint>

namespace k3::engine {

inline float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
inline float silu(float x) {
  return x * sigmoid(x);
}
// SiTU(g, u) = b1 tanh(g/b1) sigma(g) * b2 tanh(u/b2).
inline float situ(float g, float u, float b1, float b2) {
  return b1 * std::tanh(g / b1) * sigmoid(g) * (b2 * std::tanh(u / b2));
}

// out = v / sqrt(mean(v^2) + eps) * w; the mean accumulates in f64.
// out may alias v.
void rms_norm(const float* v, const float* w, double eps, int64_t n, float* out);

// AttnRes mix of one token: entries = bank[0..n_bank) + [v] (v last), each of
// width d; score_e = (entry . w) / sqrt(mean(entry^2) + eps) in f64;
// out = sum_e softmax(score)_e * entry_e (f32). `bank[e]` points at the
// token's row of snapshot e. out must not alias v or the bank rows.
void attn_res_mix(const float* v, const float* const* bank, int n_bank, const float* w, double eps,
                  int64_t d, float* out);

}  // namespace k3::engine
