#include <cmath>
#include <cstring>
#include <vector>

#include "engined/model/layers.h"
#include "engined/model/ops.h"
#include "engined/model/parallel.h"

namespace k3::engined {
namespace {

// One causal depthwise-conv step for P channels: window holds the K-1 previous
// pre-conv rows (oldest first); taps are [P][K] with tap K-1 on the current
// row. Writes SiLU(conv) to out and shifts `cur` into the window.
void conv_step(const float* taps, int64_t P, int64_t K, float* window, const float* cur,
               float* out) {
  for (int64_t c = 0; c < P; ++c) {
    const float* w = taps + c * K;
    float y = w[K - 1] * cur[c];
    for (int64_t j = 0; j < K - 1; ++j) y += w[j] * window[j * P + c];
    out[c] = kernels::silu(y);
  }
  if (K > 1) {
    std::memmove(window, window + P, static_cast<size_t>((K - 2) * P) * sizeof(float));
    std::memcpy(window + (K - 2) * P, cur, static_cast<size_t>(P) * sizeof(float));
  }
}

}  // namespace

void kda_forward(const checkpoint::ModelConfig& c, const KdaWeights& w, KdaState& st,
                 const float* x, int64_t T, float* out) {
  const int64_t H = c.kda_num_heads, d = c.kda_head_dim, P = c.kda_proj();
  const int64_t K = c.short_conv_kernel_size;
  std::vector<float> q(T * P), k(T * P), v(T * P), g(T * P), fa(T * d), z(T * P), b(T * H);
  linear(w.q, x, T, q.data());  // {T, P}
  linear(w.k, x, T, k.data());
  linear(w.v, x, T, v.data());
  linear(w.g, x, T, g.data());
  linear(w.f_a, x, T, fa.data());         // {T, d}
  linear(w.f_b, fa.data(), T, z.data());  // {T, P}
  linear(w.b, x, T, b.data());            // {T, H}
  std::vector<float> o(T * P);
  std::vector<float> qc(P), kc(P), vc(P);
  const float qscale = 1.0f / std::sqrt(static_cast<float>(d));
  for (int64_t t = 0; t < T; ++t) {
    conv_step(w.q_conv.data(), P, K, st.conv_q.data(), q.data() + t * P, qc.data());
    conv_step(w.k_conv.data(), P, K, st.conv_k.data(), k.data() + t * P, kc.data());
    conv_step(w.v_conv.data(), P, K, st.conv_v.data(), v.data() + t * P, vc.data());
    const float* zt = z.data() + t * P;
    const float* gt = g.data() + t * P;
    float* ot = o.data() + t * P;
    parallel_rows(H, 4 * d * d, [&](int64_t h0, int64_t h1) {
      std::vector<float> qh(d), kh(d), alpha(d), u(d);
      for (int64_t h = h0; h < h1; ++h) {
        const float* qr = qc.data() + h * d;
        const float* kr = kc.data() + h * d;
        const float* vr = vc.data() + h * d;
        double qq = 0, kk = 0;
        for (int64_t i = 0; i < d; ++i) {
          qq += static_cast<double>(qr[i]) * qr[i];
          kk += static_cast<double>(kr[i]) * kr[i];
        }
        const float qn = static_cast<float>(1.0 / std::sqrt(qq + 1e-6)) * qscale;
        const float kn = static_cast<float>(1.0 / std::sqrt(kk + 1e-6));
        for (int64_t i = 0; i < d; ++i) {
          qh[i] = qr[i] * qn;
          kh[i] = kr[i] * kn;
          const float zi = zt[h * d + i] + w.dt_bias[h * d + i];
          alpha[i] =
              std::exp(static_cast<float>(c.gate_lower_bound) * kernels::sigmoid(w.a[h] * zi));
        }
        const float beta = kernels::sigmoid(b[t * H + h]);
        float* S = st.s.data() + h * d * d;  // S[i][j], i = key channel
        // S <- Diag(alpha) S, and u = k^T S on the decayed state.
        for (int64_t j = 0; j < d; ++j) u[j] = 0.0f;
        for (int64_t i = 0; i < d; ++i) {
          float* row = S + i * d;
          const float a = alpha[i], ki = kh[i];
          for (int64_t j = 0; j < d; ++j) {
            row[j] *= a;
            u[j] += ki * row[j];
          }
        }
        // delta = (v - u) beta; S += k delta^T; o = q^T S.
        for (int64_t j = 0; j < d; ++j) u[j] = (vr[j] - u[j]) * beta;
        float* oh = ot + h * d;
        for (int64_t j = 0; j < d; ++j) oh[j] = 0.0f;
        for (int64_t i = 0; i < d; ++i) {
          float* row = S + i * d;
          const float ki = kh[i], qi = qh[i];
          for (int64_t j = 0; j < d; ++j) {
            row[j] += ki * u[j];
            oh[j] += qi * row[j];
          }
        }
        rms_norm(oh, w.o_norm.data(), c.rms_norm_eps, d, oh);
        for (int64_t j = 0; j < d; ++j) oh[j] *= kernels::sigmoid(gt[h * d + j]);
      }
    });
  }
  linear(w.o, o.data(), T, out);  // {T, D}
}

}  // namespace k3::engined
