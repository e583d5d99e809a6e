// The attention kernels (shared/kernels/attention.h): every variant this
// machine can run gives the scalar reference's bits, and the reference is the
// defined sum (16 lanes, pairwise) within f32 rounding of the exact one.
#include "shared/kernels/attention.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "shared/base/cpu_features.h"

namespace k3::kernels {
namespace {

using Scores = void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*,
                        int64_t);
using Weighted = void (*)(const float*, int64_t, int64_t, const float*, int64_t, int64_t, float*);

struct Variant {
  std::string name;
  Scores scores;
  Weighted weighted;
};

// Scalar first, then each SIMD level this CPU and build can run.
std::vector<Variant> variants() {
  std::vector<Variant> v{{"scalar", attention_scores_scalar, attention_weighted_sum_scalar}};
#ifdef K3_HAVE_AVX2_KERNELS
  if (base::cpu_supports_avx2())
    v.push_back({"avx2", attention_scores_avx2, attention_weighted_sum_avx2});
#endif
#ifdef K3_HAVE_AVX512_KERNELS
  if (base::cpu_supports_avx512())
    v.push_back({"avx512", attention_scores_avx512, attention_weighted_sum_avx512});
#endif
  return v;
}

std::vector<float> random_floats(size_t n, std::mt19937& rng) {
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

struct Shape {
  int64_t nq, n, d;
};
// Tails of every length below 16 and both register widths, blocks of four
// heads and leftovers, MLA's latent and rope widths.
const Shape kShapes[] = {{1, 1, 1},    {3, 5, 7},   {4, 9, 16},  {5, 17, 17},
                         {8, 33, 31},  {2, 3, 40},  {6, 12, 64}, {8, 70, 512},
                         {9, 20, 100}, {4, 2, 576}, {1, 300, 8}, {7, 4, 129}};

TEST(AttentionKernels, EveryVariantGivesTheReferenceBits) {
  std::mt19937 rng(7);
  const auto vs = variants();
  for (const Shape& sh : kShapes) {
    const int64_t q_stride = sh.d + 3, ld = sh.n + 5;  // strides wider than the rows
    const auto q = random_floats(sh.nq * q_stride, rng);
    const auto rows = random_floats(sh.n * sh.d, rng);
    const auto w = random_floats(sh.nq * ld, rng);
    const auto out0 = random_floats(sh.nq * sh.d, rng);  // accumulated into
    std::vector<float> ref_scores(sh.nq * ld, -1.0f), ref_out = out0;
    attention_scores_scalar(q.data(), sh.nq, q_stride, rows.data(), sh.n, sh.d, ref_scores.data(),
                            ld);
    attention_weighted_sum_scalar(w.data(), sh.nq, ld, rows.data(), sh.n, sh.d, ref_out.data());
    for (const Variant& v : vs) {
      SCOPED_TRACE(v.name + " nq=" + std::to_string(sh.nq) + " n=" + std::to_string(sh.n) +
                   " d=" + std::to_string(sh.d));
      std::vector<float> scores(sh.nq * ld, -1.0f), out = out0;
      v.scores(q.data(), sh.nq, q_stride, rows.data(), sh.n, sh.d, scores.data(), ld);
      v.weighted(w.data(), sh.nq, ld, rows.data(), sh.n, sh.d, out.data());
      EXPECT_TRUE(same_bits(scores, ref_scores));  // the padding between rows untouched too
      EXPECT_TRUE(same_bits(out, ref_out));
    }
  }
}

TEST(AttentionKernels, TheDispatchedKernelIsTheSelectedVariant) {
  std::mt19937 rng(3);
  const int64_t nq = 8, n = 40, d = 576;
  const auto q = random_floats(nq * d, rng), rows = random_floats(n * d, rng);
  const auto w = random_floats(nq * n, rng);
  std::vector<float> a(nq * n), b(nq * n), oa(nq * d, 0.0f), ob(nq * d, 0.0f);
  attention_scores(q.data(), nq, d, rows.data(), n, d, a.data(), n);
  attention_scores_scalar(q.data(), nq, d, rows.data(), n, d, b.data(), n);
  attention_weighted_sum(w.data(), nq, n, rows.data(), n, d, oa.data());
  attention_weighted_sum_scalar(w.data(), nq, n, rows.data(), n, d, ob.data());
  EXPECT_TRUE(same_bits(a, b)) << base::kernel_isa_name(base::kernel_isa());
  EXPECT_TRUE(same_bits(oa, ob)) << base::kernel_isa_name(base::kernel_isa());
}

TEST(AttentionKernels, TheReferenceIsTheExactSumWithinRounding) {
  std::mt19937 rng(11);
  for (const Shape& sh : kShapes) {
    const auto q = random_floats(sh.nq * sh.d, rng), rows = random_floats(sh.n * sh.d, rng);
    const auto w = random_floats(sh.nq * sh.n, rng);
    std::vector<float> scores(sh.nq * sh.n), out(sh.nq * sh.d, 0.0f);
    attention_scores_scalar(q.data(), sh.nq, sh.d, rows.data(), sh.n, sh.d, scores.data(), sh.n);
    attention_weighted_sum_scalar(w.data(), sh.nq, sh.n, rows.data(), sh.n, sh.d, out.data());
    for (int64_t h = 0; h < sh.nq; ++h)
      for (int64_t s = 0; s < sh.n; ++s) {
        double exact = 0, mag = 0;
        for (int64_t i = 0; i < sh.d; ++i) {
          const double t = double(q[h * sh.d + i]) * rows[s * sh.d + i];
          exact += t;
          mag += std::fabs(t);
        }
        EXPECT_NEAR(scores[h * sh.n + s], exact, 1e-5 * mag + 1e-30);
      }
    for (int64_t h = 0; h < sh.nq; ++h)
      for (int64_t i = 0; i < sh.d; ++i) {
        double exact = 0, mag = 0;
        for (int64_t s = 0; s < sh.n; ++s) {
          const double t = double(w[h * sh.n + s]) * rows[s * sh.d + i];
          exact += t;
          mag += std::fabs(t);
        }
        EXPECT_NEAR(out[h * sh.d + i], exact, 1e-5 * mag + 1e-30);
      }
  }
}

// The lanes are part of the definition: elements 0 and 16 share lane 0, so
// 1e8 and -1e8 cancel there before element 1's 1 joins them; a running sum
// in index order would lose the 1 (1e8 + 1 rounds to 1e8).
TEST(AttentionKernels, ElementsSixteenApartShareAPartialSum) {
  std::vector<float> q(32, 1.0f), row(32, 0.0f);
  row[0] = 1e8f;
  row[1] = 1.0f;
  row[16] = -1e8f;
  for (const Variant& v : variants()) {
    float score = -1;
    v.scores(q.data(), 1, 32, row.data(), 1, 32, &score, 1);
    EXPECT_EQ(score, 1.0f) << v.name;
  }
}

}  // namespace
}  // namespace k3::kernels
