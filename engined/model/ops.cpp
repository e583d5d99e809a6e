#include "engined/model/ops.h"

#include <vector>

namespace k3::engined {

void rms_norm(const float* v, const float* w, double eps, int64_t n, float* out) {
  double ss = 0.0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(v[i]) * v[i];
  const float inv = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  for (int64_t i = 0; i < n; ++i) out[i] = v[i] * inv * w[i];
}

void attn_res_mix(const float* v, const float* const* bank, int n_bank, const float* w, double eps,
                  int64_t d, float* out) {
  const int n = n_bank + 1;
  double score[64];
  std::vector<double> big;
  double* sc = score;
  if (n > 64) {
    big.resize(static_cast<size_t>(n));
    sc = big.data();
  }
  double mx = -INFINITY;
  for (int e = 0; e < n; ++e) {
    const float* x = e < n_bank ? bank[e] : v;
    double dot = 0.0, ss = 0.0;
    for (int64_t i = 0; i < d; ++i) {
      dot += static_cast<double>(x[i]) * w[i];
      ss += static_cast<double>(x[i]) * x[i];
    }
    sc[e] = dot / std::sqrt(ss / static_cast<double>(d) + eps);
    mx = std::fmax(mx, sc[e]);
  }
  double sum = 0.0;
  for (int e = 0; e < n; ++e) {
    sc[e] = std::exp(sc[e] - mx);
    sum += sc[e];
  }
  for (int64_t i = 0; i < d; ++i) out[i] = 0.0f;
  for (int e = 0; e < n; ++e) {
    const float p = static_cast<float>(sc[e] / sum);
    const float* x = e < n_bank ? bank[e] : v;
    for (int64_t i = 0; i < d; ++i) out[i] += p * x[i];
  }
}

}  // namespace k3::engined
