#include "shared/kernels/activations.h"

#include <cstring>

#include "shared/base/cpu_features.h"
#include "shared/kernels/situ_constants.h"

namespace k3::kernels {
namespace {

using namespace situ_constants;

double from_bits(uint64_t b) {
  double d;
  std::memcpy(&d, &b, sizeof d);
  return d;
}
uint64_t to_bits(double d) {
  uint64_t b;
  std::memcpy(&b, &d, sizeof b);
  return b;
}

// activations.h's exp: the variants repeat these operations in this order.
double exp_ref(double x) {
  x = x < -kExpMax ? -kExpMax : x;
  x = x > kExpMax ? kExpMax : x;
  const double t = x * kLog2e + kRound;
  const double n = t - kRound;
  const double r = (x - n * kLn2Hi) - n * kLn2Lo;
  double p = kInvFact[11];
  for (int k = 10; k >= 0; --k) p = p * r + kInvFact[k];
  // 2^n: n + 1023 in the exponent field.
  return p * from_bits((to_bits(t) - kRoundBits + 1023) << 52);
}

double tanh_ref(double y) {
  double a = std::fabs(y);
  a = a > kTanhMax ? kTanhMax : a;
  const double t = a < kTanhTiny ? a : 1.0 - 2.0 / (exp_ref(a + a) + 1.0);
  return std::copysign(t, y);
}

}  // namespace

float situ(float g, float u, float b1, float b2) {
  if (std::isnan(g) || std::isnan(u)) return g + u;
  const double B1 = b1, B2 = b2, i1 = 1.0 / B1, i2 = 1.0 / B2;
  const double gd = g, ud = u;
  const double sig = 1.0 / (1.0 + exp_ref(-gd));
  return static_cast<float>(((B1 * tanh_ref(gd * i1)) * sig) * (B2 * tanh_ref(ud * i2)));
}

void situ_rows_scalar(const float* g, const float* u, int64_t n, float b1, float b2, float* out) {
  for (int64_t i = 0; i < n; ++i) out[i] = situ(g[i], u[i], b1, b2);
}

void situ_rows(const float* g, const float* u, int64_t n, float b1, float b2, float* out) {
  switch (base::kernel_isa()) {
#ifdef K3_HAVE_AVX512_KERNELS
    case base::KernelIsa::kAvx512:
      return situ_rows_avx512(g, u, n, b1, b2, out);
#endif
#ifdef K3_HAVE_AVX2_KERNELS
    case base::KernelIsa::kAvx2:
      return situ_rows_avx2(g, u, n, b1, b2, out);
#endif
    default:
      return situ_rows_scalar(g, u, n, b1, b2, out);
  }
}

}  // namespace k3::kernels
