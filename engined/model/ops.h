// Small numeric building blocks of the forward pass (K3_MODEL.md notation);
// the activation functions are shared/kernels/activations.h.
// Plain scalar code the compiler vectorizes; no OpenMP inside.
#pragma once

#include <cmath>
#include <cstdint>

#include "shared/kernels/activations.h"

namespace k3::engined {

// out = v / sqrt(mean(v^2) + eps) * w; the mean accumulates in f64.
// out may alias v.
void rms_norm(const float* v, const float* w, double eps, int64_t n, float* out);

// AttnRes mix of one token: entries = bank[0..n_bank) + [v] (v last), each of
// width d; score_e = (entry . w) / sqrt(mean(entry^2) + eps) in f64;
// out = sum_e softmax(score)_e * entry_e (f32). `bank[e]` points at the
// token's row of snapshot e. out must not alias v or the bank rows.
void attn_res_mix(const float* v, const float* const* bank, int n_bank, const float* w, double eps,
                  int64_t d, float* out);

}  // namespace k3::engined
