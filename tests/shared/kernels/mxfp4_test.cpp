// MXFP4 kernels of shared/kernels/mxfp4.h: every SIMD variant this machine
// supports (AVX2, AVX-512; not only the dispatched one) against the scalar
// reference, and all against a double-precision loop written here from the
// format definition (K3_MODEL.md "MXFP4"), over odd shapes; the batched
// (matmul) forms against n calls of the same variant's matvec, bit for bit.
// Tolerances: kernel_test_support.h.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "shared/base/cpu_features.h"
#include "shared/kernels/dense.h"
#include "shared/kernels/mxfp4.h"
#include "tests/shared/kernels/kernel_test_support.h"

namespace k3::kernels {
namespace {

using testing::expect_close;
using testing::GuardedBuffer;
using testing::kRel;
using testing::mxfp4_variants;
using testing::Mxfp4Variant;
using testing::random_floats;
using testing::Reference;

// ---------------------------------------------------------------------------
// MXFP4 from the spec: code bit 3 = sign, bits 1-2 = exponent e, bit 0 =
// mantissa m; e = 0 is subnormal (m * 0.5), else 2^(e-1) * (1 + m / 2). The
// ue8m0 scale s is 2^(s-127), NaN for 255.
double e2m1_value(int code) {
  const int e = (code >> 1) & 3, m = code & 1;
  const double mag = e == 0 ? 0.5 * m : std::ldexp(1.0 + 0.5 * m, e - 1);
  return (code & 8) ? -mag : mag;
}
double ue8m0_value(int s) {
  return s == 255 ? NAN : std::ldexp(1.0, s - 127);
}

struct Mxfp4Data {
  int64_t rows, cols;
  GuardedBuffer packed, scales;
  Mxfp4Data(int64_t r, int64_t c)
      : rows(r),
        cols(c),
        packed(static_cast<size_t>(r * c / 2)),
        scales(static_cast<size_t>(r * c / 32)) {}
  Mxfp4Matrix matrix() { return {packed.as<uint8_t>(), scales.as<uint8_t>(), rows, cols}; }
  int code(int64_t r, int64_t c) {
    const uint8_t b = packed.as<uint8_t>()[r * cols / 2 + c / 2];
    return (c & 1) ? b >> 4 : b & 15;
  }
  int scale(int64_t r, int64_t g) { return scales.as<uint8_t>()[r * cols / 32 + g]; }
};

void fill_random(Mxfp4Data& m, std::mt19937& rng, int smin = 118, int smax = 130) {
  std::uniform_int_distribution<int> byte(0, 255), sc(smin, smax);
  for (size_t i = 0; i < m.packed.bytes(); ++i) m.packed.as<uint8_t>()[i] = byte(rng);
  for (size_t i = 0; i < m.scales.bytes(); ++i) m.scales.as<uint8_t>()[i] = sc(rng);
}

// y[r] with f32 activations.
Reference mxfp4_ref_f32(Mxfp4Data& m, int64_t r, const float* x) {
  Reference ref;
  for (int64_t g = 0; g < m.cols / 32; ++g) {
    const double t = ue8m0_value(m.scale(r, g));
    for (int64_t c = 32 * g; c < 32 * g + 32; ++c) {
      const double term = e2m1_value(m.code(r, c)) * x[c] * t;
      ref.value += term;
      ref.sumabs += std::fabs(term);
    }
  }
  return ref;
}

// y[r] with activations xq * xs per 32-group.
Reference mxfp4_ref_q8(Mxfp4Data& m, int64_t r, const int8_t* xq, const float* xs) {
  Reference ref;
  for (int64_t g = 0; g < m.cols / 32; ++g) {
    const double t = ue8m0_value(m.scale(r, g)) * xs[g];
    for (int64_t c = 32 * g; c < 32 * g + 32; ++c) {
      const double term = e2m1_value(m.code(r, c)) * xq[c] * t;
      ref.value += term;
      ref.sumabs += std::fabs(term);
    }
  }
  return ref;
}

// Activations as the engine passes them: exact sizes, guarded.
struct Activations {
  GuardedBuffer x, xq, xs;
  explicit Activations(int64_t n, std::mt19937& rng)
      : x(static_cast<size_t>(n) * 4),
        xq(static_cast<size_t>(n)),
        xs(static_cast<size_t>(n / 32) * 4) {
    const std::vector<float> v = random_floats(n, rng);
    std::memcpy(x.as<float>(), v.data(), v.size() * 4);
    quantize_q8_32(x.as<float>(), n, xq.as<int8_t>(), xs.as<float>());
  }
};

const int64_t kMxRows[] = {1, 3, 17};
const int64_t kMxCols[] = {32, 96, 3584};

TEST(Mxfp4Kernel, E2m1TablesMatchTheSpec) {
  for (int c = 0; c < 16; ++c) {
    EXPECT_EQ(static_cast<double>(kE2m1Values[c]), e2m1_value(c)) << c;
    EXPECT_EQ(static_cast<double>(kE2m1Doubled[c]), 2 * e2m1_value(c)) << c;
  }
  for (int s = 0; s < 255; ++s) EXPECT_EQ(static_cast<double>(kUe8m0Scale.v[s]), ue8m0_value(s));
  EXPECT_TRUE(std::isnan(kUe8m0Scale.v[255]));
}

TEST(Mxfp4Kernel, ScalarMatchesDoubleLoop) {
  std::mt19937 rng(1);
  for (int64_t rows : kMxRows)
    for (int64_t cols : kMxCols) {
      Mxfp4Data m(rows, cols);
      fill_random(m, rng);
      Activations a(cols, rng);
      std::vector<float> yf(rows), yq(rows);
      mxfp4_matvec_f32_scalar(m.matrix(), a.x.as<float>(), yf.data(), 0, rows);
      mxfp4_matvec_q8_scalar(m.matrix(), a.xq.as<int8_t>(), a.xs.as<float>(), yq.data(), 0, rows);
      for (int64_t r = 0; r < rows; ++r) {
        const std::string at =
            std::to_string(rows) + "x" + std::to_string(cols) + " row " + std::to_string(r);
        expect_close(yf[r], mxfp4_ref_f32(m, r, a.x.as<float>()), kRel, "f32 " + at);
        expect_close(yq[r], mxfp4_ref_q8(m, r, a.xq.as<int8_t>(), a.xs.as<float>()), kRel,
                     "q8 " + at);
      }
    }
}

// Which variants this run covers (the log line CI keeps): scalar always, and
// each SIMD level exactly when this CPU and build support it.
TEST(Mxfp4Kernel, TestsEveryVariantThisMachineSupports) {
  std::string names;
  for (const Mxfp4Variant& v : mxfp4_variants())
    names += std::string(names.empty() ? "" : " ") + v.name;
  std::printf("tested kernel variants: %s\n", names.c_str());
  EXPECT_EQ(names, testing::tested_variant_names());
  const auto vs = mxfp4_variants();
  ASSERT_FALSE(vs.empty());
  EXPECT_EQ(vs.front().isa, base::KernelIsa::kScalar);
  size_t expect = 1 + (base::cpu_supports_avx2() ? 1 : 0) + (base::cpu_supports_avx512() ? 1 : 0);
  EXPECT_EQ(vs.size(), expect);
  for (const Mxfp4Variant& v : vs) EXPECT_EQ(v.name, base::kernel_isa_name(v.isa));
}

TEST(Mxfp4Kernel, SimdMatchesScalarAndDoubleLoop) {
  std::mt19937 rng(2);
  const int64_t cols_list[] = {32, 96, 544, 3584, 7168};
  for (const Mxfp4Variant& v : mxfp4_variants()) {
    if (v.isa == base::KernelIsa::kScalar) continue;
    for (int64_t rows : kMxRows)
      for (int64_t cols : cols_list) {
        Mxfp4Data m(rows, cols);
        fill_random(m, rng);
        Activations a(cols, rng);
        std::vector<float> yf(rows), yq(rows), sf(rows), sq(rows);
        v.matvec_f32(m.matrix(), a.x.as<float>(), yf.data(), 0, rows);
        v.matvec_q8(m.matrix(), a.xq.as<int8_t>(), a.xs.as<float>(), yq.data(), 0, rows);
        mxfp4_matvec_f32_scalar(m.matrix(), a.x.as<float>(), sf.data(), 0, rows);
        mxfp4_matvec_q8_scalar(m.matrix(), a.xq.as<int8_t>(), a.xs.as<float>(), sq.data(), 0, rows);
        for (int64_t r = 0; r < rows; ++r) {
          const std::string at = std::string(v.name) + " " + std::to_string(rows) + "x" +
                                 std::to_string(cols) + " row " + std::to_string(r);
          const Reference rf = mxfp4_ref_f32(m, r, a.x.as<float>());
          const Reference rq = mxfp4_ref_q8(m, r, a.xq.as<int8_t>(), a.xs.as<float>());
          expect_close(yf[r], rf, kRel, "f32 " + at);
          expect_close(yq[r], rq, kRel, "q8 " + at);
          expect_close(yf[r], {sf[r], rf.sumabs}, kRel, "vs scalar f32 " + at);
          expect_close(yq[r], {sq[r], rq.sumabs}, kRel, "vs scalar q8 " + at);
        }
      }
  }
}

// A matrix wider than one x-preparation chunk (16384 columns) takes several
// passes over the rows; the result is still the row's dot product.
TEST(Mxfp4Kernel, SimdWiderThanOneChunk) {
  std::mt19937 rng(17);
  const int64_t rows = 3, cols = 16384 + 544;
  Mxfp4Data m(rows, cols);
  fill_random(m, rng);
  Activations a(cols, rng);
  for (const Mxfp4Variant& v : mxfp4_variants()) {
    std::vector<float> yf(rows), yq(rows);
    v.matvec_f32(m.matrix(), a.x.as<float>(), yf.data(), 0, rows);
    v.matvec_q8(m.matrix(), a.xq.as<int8_t>(), a.xs.as<float>(), yq.data(), 0, rows);
    for (int64_t r = 0; r < rows; ++r) {
      const std::string at = std::string(v.name) + " row " + std::to_string(r);
      expect_close(yf[r], mxfp4_ref_f32(m, r, a.x.as<float>()), kRel, "f32 " + at);
      expect_close(yq[r], mxfp4_ref_q8(m, r, a.xq.as<int8_t>(), a.xs.as<float>()), kRel,
                   "q8 " + at);
    }
  }
}

// The q8 kernels take any int8 activations, -128 included (quantize_q8_32
// never produces it, but the int16 sums of the AVX2 kernel and the int32 lanes
// of the VNNI kernel have room for it).
TEST(Mxfp4Kernel, Q8FullInt8Range) {
  std::mt19937 rng(16);
  const int64_t rows = 9, cols = 544;
  Mxfp4Data m(rows, cols);
  fill_random(m, rng);
  GuardedBuffer xq(cols), xs(cols / 32 * 4);
  std::uniform_int_distribution<int> q(-128, 127);
  for (int64_t i = 0; i < cols; ++i) xq.as<int8_t>()[i] = static_cast<int8_t>(q(rng));
  for (int i = 0; i < 32; ++i) xq.as<int8_t>()[i] = (i % 3) ? -128 : 127;  // extremes
  for (int64_t g = 0; g < cols / 32; ++g) xs.as<float>()[g] = 0.01f * (g + 1);
  for (const Mxfp4Variant& v : mxfp4_variants()) {
    std::vector<float> y(rows);
    v.matvec_q8(m.matrix(), xq.as<int8_t>(), xs.as<float>(), y.data(), 0, rows);
    for (int64_t r = 0; r < rows; ++r)
      expect_close(y[r], mxfp4_ref_q8(m, r, xq.as<int8_t>(), xs.as<float>()), kRel,
                   std::string(v.name) + " row " + std::to_string(r));
  }
}

// A sub-range of rows writes exactly those rows (callers split rows by thread).
TEST(Mxfp4Kernel, RowRangeWritesOnlyThoseRows) {
  std::mt19937 rng(3);
  Mxfp4Data m(17, 96);
  fill_random(m, rng);
  Activations a(96, rng);
  for (const Mxfp4Variant& v : mxfp4_variants())
    for (int kind = 0; kind < 2; ++kind) {
      std::vector<float> full(17), part(17, -7.0f);
      auto run = [&](float* y, int64_t r0, int64_t r1) {
        const Mxfp4Matrix w = m.matrix();
        if (kind == 0) v.matvec_f32(w, a.x.as<float>(), y, r0, r1);
        if (kind == 1) v.matvec_q8(w, a.xq.as<int8_t>(), a.xs.as<float>(), y, r0, r1);
      };
      run(full.data(), 0, 17);
      run(part.data(), 5, 12);
      for (int64_t r = 0; r < 17; ++r) {
        if (r >= 5 && r < 12)
          EXPECT_EQ(part[r], full[r]) << v.name << " kind " << kind << " row " << r;
        else
          EXPECT_EQ(part[r], -7.0f) << v.name << " kind " << kind << " row " << r;
      }
    }
}

// Runs every variant's two kernels on rows [0, rows): f32 at even indices,
// q8 at odd ones.
std::vector<std::vector<float>> all_variants(Mxfp4Data& m, Activations& a) {
  std::vector<std::vector<float>> out;
  const Mxfp4Matrix w = m.matrix();
  const int64_t n = m.rows;
  for (const Mxfp4Variant& v : mxfp4_variants()) {
    out.emplace_back(n);
    v.matvec_f32(w, a.x.as<float>(), out.back().data(), 0, n);
    out.emplace_back(n);
    v.matvec_q8(w, a.xq.as<int8_t>(), a.xs.as<float>(), out.back().data(), 0, n);
  }
  return out;
}

// The batched kernels: for every variant, n = 1..33 token rows (strided
// inputs and output, guarded so nothing past them is read), rows [r0, r1) of
// odd shapes, one NaN scale: Y is memcmp-equal to calling the same variant's
// matvec once per token, and nothing outside the rows is written.
TEST(Mxfp4Kernel, MatmulIsBitIdenticalToMatvec) {
  std::mt19937 rng(18);
  struct Shape {
    int64_t rows, cols;
  };
  const Shape shapes[] = {{5, 32}, {7, 96}, {3, 544}, {9, 3584}, {2, 16384 + 544}};
  for (const Shape& sh : shapes) {
    Mxfp4Data m(sh.rows, sh.cols);
    fill_random(m, rng);
    m.scales.as<uint8_t>()[(sh.rows - 1) * (sh.cols / 32)] = 255;  // last row: NaN
    const int64_t groups = sh.cols / 32;
    const int64_t ldx = sh.cols + 3, ldxq = sh.cols + 5, ldxs = groups + 1, ldy = sh.rows + 2;
    const int64_t max_n = sh.cols > 4096 ? 9 : 33;
    GuardedBuffer X(static_cast<size_t>((max_n - 1) * ldx + sh.cols) * 4);
    GuardedBuffer Xq(static_cast<size_t>((max_n - 1) * ldxq + sh.cols));
    GuardedBuffer Xs(static_cast<size_t>((max_n - 1) * ldxs + groups) * 4);
    for (int64_t t = 0; t < max_n; ++t) {
      const std::vector<float> v = random_floats(sh.cols, rng);
      std::memcpy(X.as<float>() + t * ldx, v.data(), v.size() * 4);
      quantize_q8_32(v.data(), sh.cols, Xq.as<int8_t>() + t * ldxq, Xs.as<float>() + t * ldxs);
    }
    const int64_t r0 = sh.rows > 2 ? 1 : 0, r1 = sh.rows;
    for (const Mxfp4Variant& v : mxfp4_variants())
      for (int64_t n = 1; n <= max_n; ++n) {
        std::vector<float> Yf(n * ldy, -7.0f), Yq(n * ldy, -7.0f);
        v.matmul_f32(m.matrix(), X.as<float>(), ldx, n, Yf.data(), ldy, r0, r1);
        v.matmul_q8(m.matrix(), Xq.as<int8_t>(), ldxq, Xs.as<float>(), ldxs, n, Yq.data(), ldy, r0,
                    r1);
        for (int64_t t = 0; t < n; ++t) {
          std::vector<float> yf(sh.rows, -7.0f), yq(sh.rows, -7.0f);
          v.matvec_f32(m.matrix(), X.as<float>() + t * ldx, yf.data(), r0, r1);
          v.matvec_q8(m.matrix(), Xq.as<int8_t>() + t * ldxq, Xs.as<float>() + t * ldxs, yq.data(),
                      r0, r1);
          const std::string at = std::string(v.name) + " " + std::to_string(sh.rows) + "x" +
                                 std::to_string(sh.cols) + " n " + std::to_string(n) + " token " +
                                 std::to_string(t);
          ASSERT_EQ(std::memcmp(Yf.data() + t * ldy, yf.data(), sh.rows * 4), 0) << "f32 " << at;
          ASSERT_EQ(std::memcmp(Yq.data() + t * ldy, yq.data(), sh.rows * 4), 0) << "q8 " << at;
          EXPECT_TRUE(std::isnan(Yq[t * ldy + sh.rows - 1])) << at;
          for (int64_t r = sh.rows; r < ldy; ++r) {
            EXPECT_EQ(Yf[t * ldy + r], -7.0f) << at;
            EXPECT_EQ(Yq[t * ldy + r], -7.0f) << at;
          }
        }
      }
  }
}

// n = 0 writes nothing; the dispatching matmul is the dispatched variant's.
TEST(Mxfp4Kernel, MatmulEdgeCasesAndDispatch) {
  std::mt19937 rng(19);
  Mxfp4Data m(4, 96);
  fill_random(m, rng);
  Activations a(96, rng);
  for (const Mxfp4Variant& v : mxfp4_variants()) {
    std::vector<float> y(4, -7.0f);
    v.matmul_f32(m.matrix(), a.x.as<float>(), 96, 0, y.data(), 4, 0, 4);
    v.matmul_q8(m.matrix(), a.xq.as<int8_t>(), 96, a.xs.as<float>(), 3, 0, y.data(), 4, 0, 4);
    for (float f : y) EXPECT_EQ(f, -7.0f) << v.name;
  }
  std::vector<float> yd(4), yv(4);
  mxfp4_matmul_q8(m.matrix(), a.xq.as<int8_t>(), 96, a.xs.as<float>(), 3, 1, yd.data(), 4, 0, 4);
  for (const Mxfp4Variant& v : mxfp4_variants())
    if (v.isa == base::kernel_isa()) {
      v.matvec_q8(m.matrix(), a.xq.as<int8_t>(), a.xs.as<float>(), yv.data(), 0, 4);
      EXPECT_EQ(std::memcmp(yd.data(), yv.data(), 16), 0) << v.name;
    }
}

// The q8 kernels take one of two scale paths per weight block (SIMD
// variants): an exponent add when every exponent of the block and every 0.5 xs
// of the call's tokens are far from the float range's ends, else a multiply.
// Both must give the same bits. Here the first token has an all-zero group
// (0.5 xs = 0: the whole call multiplies) and rows carry extreme exponents in
// some blocks (those blocks multiply even for a lone token); every n must still
// give, for every token, the bits of that token's own matvec (which takes the
// exponent-add path wherever it may), and stay close to the exact value. Up to
// 35 tokens: the AVX-512 kernel decides per tile of 16 tokens, so the later
// tiles add while the first multiplies.
TEST(Mxfp4Kernel, Q8ScalePathsGiveTheSameBits) {
  std::mt19937 rng(20);
  const int64_t rows = 7, cols = 3584 + 512 + 96, groups = cols / 32;
  Mxfp4Data m(rows, cols);
  fill_random(m, rng);
  uint8_t* sc = m.scales.as<uint8_t>();
  sc[1 * groups + 3] = 1;     // row 1, block 0: 2^-126
  sc[2 * groups + 20] = 200;  // row 2, block 1: 2^73
  sc[4 * groups + 40] = 0;    // row 4, block 2: the subnormal 2^-127
  sc[5 * groups + 130] = 63;  // row 5, the partial last block
  const int64_t max_n = 35;
  std::vector<int8_t> Xq(static_cast<size_t>(max_n * cols));
  std::vector<float> Xs(static_cast<size_t>(max_n * groups)), X;
  for (int64_t t = 0; t < max_n; ++t) {
    std::vector<float> v = random_floats(cols, rng);
    if (t == 0)
      for (int c = 64; c < 96; ++c) v[c] = 0.0f;  // group 2 all zero
    if (t == 3)
      for (float& f : v) f *= 1e-30f;  // 0.5 xs near 2^-107: outside the exponent-add range
    quantize_q8_32(v.data(), cols, Xq.data() + t * cols, Xs.data() + t * groups);
    X.insert(X.end(), v.begin(), v.end());
  }
  for (const Mxfp4Variant& v : mxfp4_variants())
    for (int64_t t0 : {0, 1}) {  // with and without the token forcing the multiply
      for (int64_t n = 1; n + t0 <= max_n; ++n) {
        std::vector<float> Y(static_cast<size_t>(n * rows), -7.0f);
        v.matmul_q8(m.matrix(), Xq.data() + t0 * cols, cols, Xs.data() + t0 * groups, groups, n,
                    Y.data(), rows, 0, rows);
        for (int64_t t = 0; t < n; ++t) {
          std::vector<float> y(rows, -7.0f);
          const int64_t tok = t0 + t;
          v.matvec_q8(m.matrix(), Xq.data() + tok * cols, Xs.data() + tok * groups, y.data(), 0,
                      rows);
          ASSERT_EQ(std::memcmp(Y.data() + t * rows, y.data(), rows * 4), 0)
              << v.name << " n " << n << " first token " << t0 << " token " << tok;
          for (int64_t r = 0; r < rows; ++r)
            expect_close(y[r], mxfp4_ref_q8(m, r, Xq.data() + tok * cols, Xs.data() + tok * groups),
                         kRel, v.name);
        }
      }
    }
}

// The AVX-512 q8 kernel's two nibble decodes (vpermb with VBMI, vpshufb
// without) give the same bits, for every n and odd shapes, whichever this CPU
// has; the log says which decode the avx512 variant used here.
TEST(Mxfp4Kernel, Avx512Q8DecodesAgree) {
  if (!base::cpu_supports_avx512()) GTEST_SKIP() << "no AVX-512 here";
#if defined(__x86_64__)
  std::printf("avx512 q8 decode on this CPU: %s\n",
              __builtin_cpu_supports("avx512vbmi") ? "vpermb (VBMI)" : "vpshufb (no VBMI)");
#endif
  std::mt19937 rng(21);
  struct Shape {
    int64_t rows, cols;
  };
  for (const Shape& sh : {Shape{5, 32}, Shape{9, 544}, Shape{6, 3584}, Shape{3, 16384 + 544}}) {
    Mxfp4Data m(sh.rows, sh.cols);
    fill_random(m, rng, 100, 140);
    const int64_t groups = sh.cols / 32, max_n = 13;
    std::vector<int8_t> Xq(static_cast<size_t>(max_n * sh.cols));
    std::vector<float> Xs(static_cast<size_t>(max_n * groups));
    for (int64_t t = 0; t < max_n; ++t) {
      const std::vector<float> v = random_floats(sh.cols, rng);
      quantize_q8_32(v.data(), sh.cols, Xq.data() + t * sh.cols, Xs.data() + t * groups);
    }
    for (int64_t n = 1; n <= max_n; ++n) {
      std::vector<float> a(static_cast<size_t>(n * sh.rows), -7.0f), b = a;
      mxfp4_matmul_q8_avx512(m.matrix(), Xq.data(), sh.cols, Xs.data(), groups, n, a.data(),
                             sh.rows, 0, sh.rows);
      mxfp4_matmul_q8_avx512_novbmi(m.matrix(), Xq.data(), sh.cols, Xs.data(), groups, n, b.data(),
                                    sh.rows, 0, sh.rows);
      ASSERT_EQ(std::memcmp(a.data(), b.data(), a.size() * 4), 0)
          << sh.rows << "x" << sh.cols << " n " << n;
    }
  }
}

// Scale 255 is NaN in OCP MX: the row's result is NaN in every variant, even
// when that group's integer dot product (or its activations) is zero, and
// wherever the group sits (first, middle of an 8-group block, a last partial
// block, the lone last group of an odd count).
TEST(Mxfp4Kernel, NanScalePropagatesInEveryVariant) {
  std::mt19937 rng(4);
  for (int64_t cols : {int64_t{32}, int64_t{96}, int64_t{544}, int64_t{3584}}) {
    const int64_t groups = cols / 32;
    for (int64_t g : {int64_t{0}, groups / 2, groups - 1}) {
      for (int kind = 0; kind < 3; ++kind) {  // 0: random, 1: zero weights, 2: zero x
        Mxfp4Data m(4, cols);
        fill_random(m, rng);
        Activations a(cols, rng);
        m.scales.as<uint8_t>()[1 * groups + g] = 255;  // row 1 only
        if (kind == 1) std::memset(m.packed.as<uint8_t>() + 1 * cols / 2 + 16 * g, 0, 16);
        if (kind == 2) {
          for (int i = 0; i < 32; ++i) a.x.as<float>()[32 * g + i] = 0.0f;
          quantize_q8_32(a.x.as<float>(), cols, a.xq.as<int8_t>(), a.xs.as<float>());
        }
        const auto ys = all_variants(m, a);
        for (size_t v = 0; v < ys.size(); ++v) {
          const std::string at = "variant " + std::to_string(v) + " cols " + std::to_string(cols) +
                                 " group " + std::to_string(g) + " kind " + std::to_string(kind);
          EXPECT_TRUE(std::isnan(ys[v][1])) << at;
          EXPECT_FALSE(std::isnan(ys[v][0])) << at;
          EXPECT_FALSE(std::isnan(ys[v][2])) << at;
        }
      }
    }
  }
}

// Every exponent byte 0..254 gives 2^(s-127) (s = 0: the subnormal 2^-127).
// Row r has all scales r (r < 255): y must be 2^(r-127) times the s = 127 row.
TEST(Mxfp4Kernel, EveryScaleExponent) {
  std::mt19937 rng(5);
  const int64_t rows = 255, cols = 96;
  Mxfp4Data m(rows, cols);
  fill_random(m, rng);
  // The same weights in every row.
  for (int64_t r = 1; r < rows; ++r)
    std::memcpy(m.packed.as<uint8_t>() + r * cols / 2, m.packed.as<uint8_t>(), cols / 2);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t g = 0; g < cols / 32; ++g) m.scales.as<uint8_t>()[r * cols / 32 + g] = r;
  Activations a(cols, rng);
  const auto ys = all_variants(m, a);
  for (size_t v = 0; v < ys.size(); ++v) {
    const double unit = ys[v][127];
    const Reference ref = (v % 2 == 0) ? mxfp4_ref_f32(m, 127, a.x.as<float>())
                                       : mxfp4_ref_q8(m, 127, a.xq.as<int8_t>(), a.xs.as<float>());
    expect_close(ys[v][127], ref, kRel, "variant " + std::to_string(v));
    for (int64_t r = 0; r < rows; ++r) {
      const double want = std::ldexp(unit, static_cast<int>(r) - 127);
      const std::string at = "variant " + std::to_string(v) + " scale " + std::to_string(r);
      if (r >= 20 && r <= 230) {
        // Scaling by a power of two is exact while every step stays normal.
        EXPECT_EQ(static_cast<double>(ys[v][r]), want) << at;
      } else if (std::fabs(want) > 1e36) {
        // Near the top of the f32 range group terms may overflow (to inf, and
        // opposite infinities to NaN) in every variant alike.
        EXPECT_TRUE(!std::isfinite(ys[v][r]) ||
                    std::fabs(ys[v][r] - want) <= kRel * std::fabs(want))
            << at << ": " << ys[v][r] << " vs " << want;
      } else {
        // Subnormal results and group scales: each rounding errs by up to 2^-150,
        // times |integer dot| < 2^16 for the q8 group scale.
        EXPECT_NEAR(ys[v][r], want, std::ldexp(1.0, -132)) << at;
        EXPECT_EQ(std::signbit(ys[v][r]), std::signbit(want)) << at;
      }
    }
  }
}

// Scale 0 is the subnormal 2^-127, not zero.
TEST(Mxfp4Kernel, ScaleZeroIsTwoToMinus127) {
  std::mt19937 rng(6);
  Mxfp4Data m(3, 96);
  fill_random(m, rng);
  std::memset(m.scales.as<uint8_t>(), 0, m.scales.bytes());
  // Large activations keep the q8 group scale t * 0.5 * xs normal-ish.
  Activations a(96, rng);
  const auto ys = all_variants(m, a);
  for (size_t v = 0; v < ys.size(); ++v)
    for (int64_t r = 0; r < 3; ++r) {
      const Reference ref = (v % 2 == 0) ? mxfp4_ref_f32(m, r, a.x.as<float>())
                                         : mxfp4_ref_q8(m, r, a.xq.as<int8_t>(), a.xs.as<float>());
      EXPECT_NE(ys[v][r], 0.0f) << v;
      EXPECT_NEAR(ys[v][r], ref.value, 1e-3 * ref.sumabs + std::ldexp(1.0, -140))
          << "variant " << v << " row " << r;
    }
}

// Quantizing the activations to int8 costs little: rel-L2(q8 - f32) < 1e-2.
TEST(Mxfp4Kernel, Q8CloseToFloatKernel) {
  std::mt19937 rng(7);
  const int64_t rows = 64, cols = 3584;
  Mxfp4Data m(rows, cols);
  fill_random(m, rng);
  std::vector<float> x = random_floats(cols, rng);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  for (auto& v : x) v = nd(rng);  // heavier tails than uniform
  std::vector<int8_t> xq(cols);
  std::vector<float> xs(cols / 32);
  quantize_q8_32(x.data(), cols, xq.data(), xs.data());
  std::vector<float> yf(rows), yq(rows);
  mxfp4_matvec_f32(m.matrix(), x.data(), yf.data(), 0, rows);
  mxfp4_matvec_q8(m.matrix(), xq.data(), xs.data(), yq.data(), 0, rows);
  double num = 0, den = 0;
  for (int64_t r = 0; r < rows; ++r) {
    num += (yq[r] - yf[r]) * static_cast<double>(yq[r] - yf[r]);
    den += yf[r] * static_cast<double>(yf[r]);
  }
  EXPECT_LT(std::sqrt(num / den), 1e-2);
}

TEST(Mxfp4Kernel, QuantizeQ8RoundsToNearestEven) {
  std::vector<float> x(64, 0.0f);
  x[0] = 127.0f;  // amax 127: scale exactly 1
  x[1] = 2.6f;    // truncation would give 2
  x[2] = -2.6f;
  x[3] = 2.5f;  // ties to even
  x[4] = 3.5f;
  x[5] = -0.4f;
  x[6] = -126.6f;
  // x[32..63] stays zero: scale 0, q 0.
  std::vector<int8_t> q(64, 99);
  std::vector<float> s(2, -1.0f);
  quantize_q8_32(x.data(), 64, q.data(), s.data());
  EXPECT_EQ(s[0], 1.0f);
  EXPECT_EQ(q[0], 127);
  EXPECT_EQ(q[1], 3);
  EXPECT_EQ(q[2], -3);
  EXPECT_EQ(q[3], 2);
  EXPECT_EQ(q[4], 4);
  EXPECT_EQ(q[5], 0);
  EXPECT_EQ(q[6], -127);
  EXPECT_EQ(s[1], 0.0f);
  for (int i = 32; i < 64; ++i) EXPECT_EQ(q[i], 0) << i;
}

TEST(Mxfp4Kernel, QuantizeQ8ErrorAtMostHalfAStep) {
  std::mt19937 rng(8);
  const std::vector<float> x = random_floats(3584, rng, -5.0f, 5.0f);
  std::vector<int8_t> q(x.size());
  std::vector<float> s(x.size() / 32);
  quantize_q8_32(x.data(), static_cast<int64_t>(x.size()), q.data(), s.data());
  for (size_t i = 0; i < x.size(); ++i) {
    EXPECT_LE(std::abs(q[i]), 127);
    EXPECT_LE(std::fabs(x[i] - q[i] * static_cast<double>(s[i / 32])), s[i / 32] * 0.5000001) << i;
  }
}

// Non-finite activations (a hostile remote request, a corrupt weight) give
// q = 0 where the cast would be undefined, a non-finite group scale, and
// leave finite groups exactly as before (found by fuzz_remote_request).
TEST(Mxfp4Kernel, QuantizeQ8OfNonFiniteInputsIsDefined) {
  std::vector<float> x(64);
  for (int i = 0; i < 64; ++i) x[i] = static_cast<float>(i - 30) * 0.25f;
  std::vector<int8_t> want(64);
  std::vector<float> want_s(2);
  quantize_q8_32(x.data(), 64, want.data(), want_s.data());
  x[3] = std::numeric_limits<float>::quiet_NaN();
  x[7] = std::numeric_limits<float>::infinity();
  std::vector<int8_t> q(64);
  std::vector<float> s(2);
  quantize_q8_32(x.data(), 64, q.data(), s.data());
  EXPECT_FALSE(std::isfinite(s[0]));
  for (int i = 0; i < 32; ++i) EXPECT_GE(q[i], -127) << i;
  EXPECT_EQ(q[3], 0);
  EXPECT_EQ(q[7], 0);
  EXPECT_EQ(s[1], want_s[1]);
  for (int i = 32; i < 64; ++i) EXPECT_EQ(q[i], want[i]) << i;
}

}  // namespace
}  // namespace k3::kernels
