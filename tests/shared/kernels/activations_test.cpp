// SiTU (shared/kernels/activations.h): every variant this machine can run
// gives the scalar reference's bits (tails, aliasing, the float range's
// ends, infinities; NaN in gives NaN out), and the reference is within one
// float ulp of the exact function (long double).
#include "shared/kernels/activations.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "shared/base/cpu_features.h"

namespace k3::kernels {
namespace {

using Rows = void (*)(const float*, const float*, int64_t, float, float, float*);

struct Variant {
  std::string name;
  Rows rows;
};

// Scalar first, then each SIMD level this CPU and build can run.
std::vector<Variant> variants() {
  std::vector<Variant> v{{"scalar", situ_rows_scalar}};
#ifdef K3_HAVE_AVX2_KERNELS
  if (base::cpu_supports_avx2()) v.push_back({"avx2", situ_rows_avx2});
#endif
#ifdef K3_HAVE_AVX512_KERNELS
  if (base::cpu_supports_avx512()) v.push_back({"avx512", situ_rows_avx512});
#endif
  return v;
}

uint32_t bits(float f) {
  uint32_t b;
  std::memcpy(&b, &f, sizeof b);
  return b;
}

// Inputs: normal draws at several scales, then the special values.
std::vector<float> inputs(std::mt19937& rng, size_t n) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> v = {0.0f,   -0.0f,   1e-45f,   -1e-45f, 1e-30f,  -1e-30f,  1e-7f,
                          -1e-7f, 0.5f,    -0.5f,    4.0f,    -4.0f,   25.0f,    -25.0f,
                          88.0f,  -88.0f,  104.0f,   -104.0f, 3000.0f, -3000.0f, 1e30f,
                          -1e30f, FLT_MAX, -FLT_MAX, inf,     -inf,    FLT_MIN,  -FLT_MIN};
  std::normal_distribution<float> d(0.0f, 1.0f);
  const float scales[] = {1e-3f, 1.0f, 5.0f, 30.0f, 200.0f};
  while (v.size() < n) v.push_back(d(rng) * scales[v.size() % 5]);
  v.resize(n);
  return v;
}

TEST(Situ, EveryVariantGivesTheReferenceBits) {
  std::mt19937 rng(7);
  const float betas[][2] = {{4.0f, 25.0f}, {1.0f, 1.0f}, {0.3f, 100.0f}};
  // Every tail below both vector widths, and a long run.
  std::vector<int64_t> lengths;
  for (int64_t n = 0; n <= 40; ++n) lengths.push_back(n);
  lengths.push_back(4099);
  for (const auto& b : betas)
    for (int64_t n : lengths) {
      std::vector<float> g = inputs(rng, static_cast<size_t>(n));
      std::vector<float> u = inputs(rng, static_cast<size_t>(n));
      std::shuffle(u.begin(), u.end(), rng);
      std::vector<float> ref(static_cast<size_t>(n));
      situ_rows_scalar(g.data(), u.data(), n, b[0], b[1], ref.data());
      for (int64_t i = 0; i < n; ++i)
        ASSERT_EQ(bits(ref[i]), bits(situ(g[i], u[i], b[0], b[1]))) << i;
      for (const Variant& v : variants()) {
        // Into a separate buffer (with a guard past the end), then in place.
        std::vector<float> out(static_cast<size_t>(n) + 1, 12345.0f);
        v.rows(g.data(), u.data(), n, b[0], b[1], out.data());
        EXPECT_EQ(out[static_cast<size_t>(n)], 12345.0f) << v.name << " wrote past the end";
        std::vector<float> inplace = g;
        v.rows(inplace.data(), u.data(), n, b[0], b[1], inplace.data());
        for (int64_t i = 0; i < n; ++i) {
          EXPECT_FALSE(std::isnan(ref[i])) << g[i] << " " << u[i];
          ASSERT_EQ(bits(out[i]), bits(ref[i])) << v.name << " n " << n << " g " << g[i] << " u "
                                                << u[i] << " betas " << b[0] << " " << b[1];
          ASSERT_EQ(bits(inplace[i]), bits(ref[i])) << v.name << " in place";
        }
      }
    }
}

TEST(Situ, NanInGivesNanOut) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  for (const Variant& v : variants())
    for (int64_t n : {1, 7, 8, 16, 19}) {
      for (int64_t at = 0; at < n; ++at)
        for (int which = 0; which < 3; ++which) {
          std::vector<float> g(static_cast<size_t>(n), 1.5f), u(static_cast<size_t>(n), -2.0f);
          if (which != 1) g[static_cast<size_t>(at)] = nan;
          if (which != 0) u[static_cast<size_t>(at)] = nan;
          std::vector<float> out(static_cast<size_t>(n));
          v.rows(g.data(), u.data(), n, 4.0f, 25.0f, out.data());
          for (int64_t i = 0; i < n; ++i)
            EXPECT_EQ(std::isnan(out[i]), i == at) << v.name << " n " << n << " at " << at;
        }
    }
}

long double exact(long double g, long double u, long double b1, long double b2) {
  return b1 * std::tanh(g / b1) / (1.0L + std::exp(-g)) * (b2 * std::tanh(u / b2));
}

// The distance from the float `f` to `x` in units of the float spacing at x.
double ulps(float f, long double x) {
  const float xf = static_cast<float>(x);
  const float up = std::nextafter(std::fabs(xf), std::numeric_limits<float>::infinity());
  const long double ulp = static_cast<long double>(up) - std::fabs(static_cast<long double>(xf));
  return static_cast<double>(std::fabs(static_cast<long double>(f) - x) / ulp);
}

TEST(Situ, ReferenceIsWithinAnUlpOfTheExactFunction) {
  std::mt19937 rng(11);
  const float betas[][2] = {{4.0f, 25.0f}, {1.0f, 1.0f}, {0.3f, 100.0f}};
  double worst = 0;
  for (const auto& b : betas) {
    const std::vector<float> g = inputs(rng, 200000), u = inputs(rng, 200000);
    for (size_t i = 0; i < g.size(); ++i) {
      if (!std::isfinite(g[i]) || !std::isfinite(u[i])) continue;
      const long double x = exact(g[i], u[i], b[0], b[1]);
      if (!std::isfinite(static_cast<float>(x))) continue;  // beyond float: inf either way
      const double e = ulps(situ(g[i], u[i], b[0], b[1]), x);
      worst = std::max(worst, e);
      ASSERT_LE(e, 1.0) << "g " << g[i] << " u " << u[i] << " betas " << b[0] << " " << b[1];
    }
  }
  std::printf("worst error %.3f ulp\n", worst);
}

}  // namespace
}  // namespace k3::kernels
