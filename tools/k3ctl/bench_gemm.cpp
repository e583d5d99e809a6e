// Compute peaks and GEMM throughput (tools/k3ctl/bench_gemm.h).
//
// Peaks: every thread runs, in one OpenMP region, a loop of the widest
// multiply-add this CPU has on register operands only, over independent
// accumulators (enough to cover the instruction's latency on 2 pipes), for
// about 0.1 s; best of 3 such runs. The inputs come from a volatile and the
// sums go to one, so the compiler can neither fold nor drop the loop.
//   int8: vpdpbusd zmm (AVX-512 VNNI, 64 u8 x s8 products each), else
//         vpdpbusd ymm (AVX-VNNI, 32), else vpmaddubsw + vpmaddwd + vpaddd ymm
//         (AVX2, 32 products per three instructions);
//   f32:  vfmadd231ps zmm (16 lanes), else ymm (8);
// one MAC per product or lane. A scalar loop is the last resort.
//
// GEMMs: one matrix per shape (weights reused across calls: at n = 256 a call
// is compute-bound, not a bandwidth test), n token rows per call, rows split
// by kernels::parallel_rows(rows, cols * n, n, ...) as the engine splits
// them. Each call is timed: one untimed warm-up call, then calls for at least
// 3 and about seconds / 2; the best call counts: rows * cols * n MACs over its
// time. Dense activations are f32 uniform in [-1, 1] (DenseMatrix::matmul
// takes them as f32 and does its own preparation, which is timed); the
// mxfp4_i8 activations are quantized once with quantize_q8_32 before the
// timing: quantization is not timed (in the engine it is a step of its own
// before the matmul calls, shared/experts/expert_compute.cpp).
#include "tools/k3ctl/bench_gemm.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <functional>
#include <string>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "shared/base/cpu_features.h"
#include "shared/kernels/dense.h"
#include "shared/kernels/mxfp4.h"
#include "shared/kernels/parallel_rows.h"

namespace k3::tools {
namespace {

using nlohmann::json;

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

volatile int g_seed = 3;  // the peak loops' inputs, unknown to the compiler
volatile double g_sink;   // their results

// ---- Peak loops: each returns a value derived from every accumulator. ----

// The sum of a loop's stored lanes (what keeps the loop's work alive).
template <typename V, size_t N>
double sum_of(const V (&lanes)[N]) {
  double sum = 0;
  for (V v : lanes) sum += v;
  return sum;
}

#if defined(__x86_64__)
// Independent chains per loop: a multiply-add's latency (4-5 cycles) times
// the pipes that take it (2) is at most 10. Every chain starts from its own
// value, so the compiler cannot merge identical ones. GCC 12 copies each
// vpdpbusd accumulator to another register and back every iteration (in the
// ymm loop, 16 registers being too few, through the stack); on Zen 5 that
// costs nothing measurable (vpdpbusd zmm: 460 GMAC/s per thread, the same as
// a hand-written asm loop; ymm: 220, its 2-per-cycle bound).
constexpr int kAccZmm = 12;
constexpr int kAccYmm = 10;     // ymm: 16 registers, 2 hold the inputs
constexpr int kAccMaddubs = 8;  // AVX2 int8: also a temporary per chain

__attribute__((target("avx512f,avx512bw,avx512vnni"))) double int8_loop_avx512_vnni(int64_t iters,
                                                                                    int seed) {
  const __m512i a = _mm512_set1_epi32(seed), b = _mm512_set1_epi32(seed * 7 + 1);
  __m512i acc[kAccZmm];
  for (int j = 0; j < kAccZmm; ++j) acc[j] = _mm512_set1_epi32(j);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kAccZmm; ++j) acc[j] = _mm512_dpbusd_epi32(acc[j], a, b);
  }
  __m512i s = acc[0];
  for (int j = 1; j < kAccZmm; ++j) s = _mm512_add_epi32(s, acc[j]);
  // Stored, not _mm512_reduce_add_epi32 (GCC 12 warns inside that one).
  alignas(64) int32_t lanes[16];
  _mm512_store_si512(lanes, s);
  return sum_of(lanes);
}

__attribute__((target("avx2,avxvnni"))) double int8_loop_avx_vnni(int64_t iters, int seed) {
  const __m256i a = _mm256_set1_epi32(seed), b = _mm256_set1_epi32(seed * 7 + 1);
  __m256i acc[kAccYmm];
  for (int j = 0; j < kAccYmm; ++j) acc[j] = _mm256_set1_epi32(j);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kAccYmm; ++j) acc[j] = _mm256_dpbusd_avx_epi32(acc[j], a, b);
  }
  __m256i s = acc[0];
  for (int j = 1; j < kAccYmm; ++j) s = _mm256_add_epi32(s, acc[j]);
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return sum_of(lanes);
}

__attribute__((target("avx2"))) double int8_loop_avx2(int64_t iters, int seed) {
  __m256i a = _mm256_set1_epi32(seed);
  const __m256i b = _mm256_set1_epi32(seed * 7 + 1), ones = _mm256_set1_epi16(1);
  __m256i acc[kAccMaddubs];
  for (int j = 0; j < kAccMaddubs; ++j) acc[j] = _mm256_set1_epi32(j);
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kAccMaddubs; ++j) {
      // The products do not depend on the accumulator: without this the
      // compiler would compute them once, outside the loop.
      asm volatile("" : "+x"(a));
      const __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(a, b), ones);
      acc[j] = _mm256_add_epi32(acc[j], p);
    }
  }
  __m256i s = acc[0];
  for (int j = 1; j < kAccMaddubs; ++j) s = _mm256_add_epi32(s, acc[j]);
  alignas(32) int32_t lanes[8];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return sum_of(lanes);
}

// acc = acc * a + b with a = 1/2 settles at 2b: no overflow, no denormals.
__attribute__((target("avx512f"))) double f32_loop_avx512(int64_t iters, int seed) {
  const __m512 a = _mm512_set1_ps(0.5f), b = _mm512_set1_ps(static_cast<float>(seed));
  __m512 acc[kAccZmm];
  for (int j = 0; j < kAccZmm; ++j) acc[j] = _mm512_set1_ps(static_cast<float>(j));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kAccZmm; ++j) acc[j] = _mm512_fmadd_ps(acc[j], a, b);
  }
  __m512 s = acc[0];
  for (int j = 1; j < kAccZmm; ++j) s = _mm512_add_ps(s, acc[j]);
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, s);
  return sum_of(lanes);
}

__attribute__((target("avx2,fma"))) double f32_loop_avx2(int64_t iters, int seed) {
  const __m256 a = _mm256_set1_ps(0.5f), b = _mm256_set1_ps(static_cast<float>(seed));
  __m256 acc[kAccYmm];
  for (int j = 0; j < kAccYmm; ++j) acc[j] = _mm256_set1_ps(static_cast<float>(j));
  for (int64_t i = 0; i < iters; ++i) {
#pragma GCC unroll 16
    for (int j = 0; j < kAccYmm; ++j) acc[j] = _mm256_fmadd_ps(acc[j], a, b);
  }
  __m256 s = acc[0];
  for (int j = 1; j < kAccYmm; ++j) s = _mm256_add_ps(s, acc[j]);
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, s);
  return sum_of(lanes);
}
#endif

constexpr int kAccScalar = 8;

double int8_loop_scalar(int64_t iters, int seed) {
  int32_t a = seed, b = seed * 7 + 1, acc[kAccScalar] = {};
  for (int64_t i = 0; i < iters; ++i)
    for (int32_t& x : acc) {
      asm volatile("" : "+r"(a));  // a product per step, not one hoisted
      x += a * b;
      asm volatile("" : "+r"(x));  // keeps the sum from being closed-formed
    }
  return sum_of(acc);
}

double f32_loop_scalar(int64_t iters, int seed) {
  const float a = 0.5f, b = static_cast<float>(seed);
  float acc[kAccScalar] = {};
  for (int64_t i = 0; i < iters; ++i)
    for (float& x : acc) x = x * a + b;
  return sum_of(acc);
}

struct PeakLoop {
  const char* metric;
  const char* isa;    // the instruction set the loop uses
  const char* instr;  // the multiply-add instruction(s) timed
  int64_t macs_per_iter;
  double (*run)(int64_t iters, int seed);
};

PeakLoop int8_peak_loop() {
#if defined(__x86_64__)
  // cpu_supports_avx512 includes AVX-512 VNNI and the OS saving ZMM state.
  if (base::cpu_supports_avx512())
    return {"int8_peak_gmacs", "avx512_vnni", "vpdpbusd zmm", kAccZmm * 64, int8_loop_avx512_vnni};
  if (base::cpu_supports_avx2() && __builtin_cpu_supports("avxvnni"))
    return {"int8_peak_gmacs", "avx_vnni", "vpdpbusd ymm", kAccYmm * 32, int8_loop_avx_vnni};
  if (base::cpu_supports_avx2())
    return {"int8_peak_gmacs", "avx2", "vpmaddubsw+vpmaddwd ymm", kAccMaddubs * 32, int8_loop_avx2};
#endif
  return {"int8_peak_gmacs", "scalar", "imul", kAccScalar, int8_loop_scalar};
}

PeakLoop f32_peak_loop() {
#if defined(__x86_64__)
  if (base::cpu_supports_avx512())
    return {"f32_peak_gmacs", "avx512f", "vfmadd231ps zmm", kAccZmm * 16, f32_loop_avx512};
  if (base::cpu_supports_avx2())
    return {"f32_peak_gmacs", "avx2", "vfmadd231ps ymm", kAccYmm * 8, f32_loop_avx2};
#endif
  return {"f32_peak_gmacs", "scalar", "mul+add", kAccScalar, f32_loop_scalar};
}

// GMAC/s of `loop` on `threads` threads: iterations for ~0.1 s (calibrated on
// one thread), run in one parallel region, best of 3.
double measure_peak(const PeakLoop& loop, int threads) {
  constexpr double kRunSeconds = 0.1;
  int64_t iters = 1 << 10;
  double dt = 0;
  for (;;) {
    const double t0 = now_s();
    g_sink = loop.run(iters, g_seed);
    dt = now_s() - t0;
    if (dt > 0.01) break;
    iters *= 4;
  }
  iters = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(iters) * kRunSeconds / dt));
  double best = 0;
  for (int rep = 0; rep < 3; ++rep) {
    double sink = 0;
    const double t0 = now_s();
#pragma omp parallel num_threads(threads) reduction(+ : sink)
    sink += loop.run(iters, g_seed);
    const double s = now_s() - t0;
    g_sink = sink;
    const double macs = static_cast<double>(threads) * static_cast<double>(iters) *
                        static_cast<double>(loop.macs_per_iter);
    best = std::max(best, macs / s / 1e9);
  }
  return best;
}

// ---- GEMMs ----

// Token rows per call, ascending: one gemm_gmacs line each.
constexpr int64_t kTokenRows[] = {32, 256};

struct GemmShape {
  int64_t rows, cols;
};

struct GemmResult {
  const char* kind;  // dense_int4, dense_int8, mxfp4_i8
  GemmShape shape;
  int64_t n;
  double gmacs;
  int calls;  // timed calls (after the warm-up)
};

// splitmix64: uniform bits from an index.
uint64_t mix(uint64_t i) {
  uint64_t z = (i + 1) * 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

// Uniform in [-1, 1].
float uniform(uint64_t i) {
  return static_cast<float>(mix(i) >> 40) / 8388607.5f - 1.0f;
}

// The best time of one call: a warm-up, then at least 3 calls and about
// seconds / 2 of them. `calls` gets the number timed.
double best_call_s(double seconds, const std::function<void()>& call, int& calls) {
  call();
  double best = 1e30;
  const double start = now_s();
  calls = 0;
  while (calls < 3 || now_s() - start < seconds * 0.5) {
    const double t0 = now_s();
    call();
    best = std::min(best, now_s() - t0);
    ++calls;
  }
  return best;
}

void bench_dense_gemm(const GemmBenchOptions& opt, int bits, const GemmShape& s,
                      std::vector<GemmResult>& out) {
  // From pseudo-random rows, quantized by set_rows as the loader does.
  kernels::DenseMatrix w(bits, s.rows, s.cols);
  {
    constexpr int64_t kRowsPerStep = 64;
    std::vector<float> src(static_cast<size_t>(kRowsPerStep * s.cols));
    for (int64_t r0 = 0; r0 < s.rows; r0 += kRowsPerStep) {
      const int64_t n = std::min(kRowsPerStep, s.rows - r0);
      for (size_t i = 0; i < static_cast<size_t>(n * s.cols); ++i)
        src[i] = uniform(static_cast<uint64_t>(r0 * s.cols) + i);
      w.set_rows(r0, n, src.data());
    }
  }
  constexpr int64_t kMaxN = kTokenRows[1];
  std::vector<float> X(static_cast<size_t>(kMaxN * s.cols));  // {kMaxN, cols}
  for (size_t i = 0; i < X.size(); ++i) X[i] = uniform(i + (uint64_t{1} << 40));
  std::vector<float> Y(static_cast<size_t>(kMaxN * s.rows));  // {kMaxN, rows}
  for (int64_t n : kTokenRows) {
    int calls = 0;
    const double t = best_call_s(
        opt.seconds,
        [&] {
          kernels::parallel_rows(
              s.rows, s.cols * n, n,
              [&](int64_t r0, int64_t r1) {
                w.matmul(X.data(), s.cols, n, Y.data(), s.rows, r0, r1);
              },
              opt.threads);
        },
        calls);
    out.push_back({bits == 4 ? "dense_int4" : "dense_int8", s, n,
                   static_cast<double>(s.rows * s.cols * n) / t / 1e9, calls});
  }
}

void bench_mxfp4_gemm(const GemmBenchOptions& opt, const GemmShape& s,
                      std::vector<GemmResult>& out) {
  const size_t packed_bytes = static_cast<size_t>(s.rows * s.cols / 2);
  const int64_t groups = s.cols / 32;
  std::vector<uint8_t> packed(packed_bytes), scales(static_cast<size_t>(s.rows * groups));
  for (size_t i = 0; i < packed.size(); ++i) packed[i] = static_cast<uint8_t>(mix(i) >> 56);
  // Scales 2^-9 .. 2^-2 (realistic; keeps the sums finite).
  for (size_t i = 0; i < scales.size(); ++i)
    scales[i] = static_cast<uint8_t>(118 + (mix(i + (uint64_t{1} << 41)) >> 61));
  const kernels::Mxfp4Matrix w{packed.data(), scales.data(), s.rows, s.cols};
  constexpr int64_t kMaxN = kTokenRows[1];
  std::vector<int8_t> Xq(static_cast<size_t>(kMaxN * s.cols));  // {kMaxN, cols}
  std::vector<float> Xs(static_cast<size_t>(kMaxN * groups));   // {kMaxN, cols / 32}
  {
    std::vector<float> x(static_cast<size_t>(s.cols));
    for (int64_t t = 0; t < kMaxN; ++t) {
      for (size_t i = 0; i < x.size(); ++i)
        x[i] = uniform(static_cast<uint64_t>(t * s.cols) + i + (uint64_t{1} << 40));
      kernels::quantize_q8_32(x.data(), s.cols, Xq.data() + t * s.cols, Xs.data() + t * groups);
    }
  }
  std::vector<float> Y(static_cast<size_t>(kMaxN * s.rows));  // {kMaxN, rows}
  for (int64_t n : kTokenRows) {
    int calls = 0;
    const double t = best_call_s(
        opt.seconds,
        [&] {
          kernels::parallel_rows(
              s.rows, s.cols * n, n,
              [&](int64_t r0, int64_t r1) {
                kernels::mxfp4_matmul_q8(w, Xq.data(), s.cols, Xs.data(), groups, n, Y.data(),
                                         s.rows, r0, r1);
              },
              opt.threads);
        },
        calls);
    out.push_back({"mxfp4_i8", s, n, static_cast<double>(s.rows * s.cols * n) / t / 1e9, calls});
  }
}

// v rounded to 1 / per_unit (100: two decimals).
double round_to(double v, double per_unit) {
  return std::round(v * per_unit) / per_unit;
}

}  // namespace

std::vector<json> bench_gemm(const GemmBenchOptions& opt) {
  const PeakLoop int8_loop = int8_peak_loop(), f32_loop = f32_peak_loop();
  double int8_peak = measure_peak(int8_loop, opt.threads);
  double f32_peak = measure_peak(f32_loop, opt.threads);

  std::vector<GemmResult> results;
  // Dense shapes (rows x cols) with the model's hidden size, 7168, on one side.
  const GemmShape dense_shapes[] = {{12288, 7168}, {18432, 7168}, {7168, 12288}};
  for (int bits : {4, 8})
    for (const GemmShape& s : dense_shapes) bench_dense_gemm(opt, bits, s, results);
  // A routed expert's shapes: w1/w3 [3072, 3584], w2 [3584, 3072].
  for (const GemmShape& s : {GemmShape{3072, 3584}, GemmShape{3584, 3072}})
    bench_mxfp4_gemm(opt, s, results);

  int8_peak = std::max(int8_peak, measure_peak(int8_loop, opt.threads));
  f32_peak = std::max(f32_peak, measure_peak(f32_loop, opt.threads));

  std::vector<json> lines;
  for (const auto& [loop, peak] : {std::pair{int8_loop, int8_peak}, std::pair{f32_loop, f32_peak}})
    lines.push_back(json{{"metric", loop.metric},
                         {"threads", opt.threads},
                         {"value", round_to(peak, 100)},
                         {"unit", "GMAC/s"},
                         {"isa", loop.isa},
                         {"instr", loop.instr}});
  const std::string kernel_isa(base::kernel_isa_name(base::kernel_isa()));
  for (const GemmResult& r : results) {
    const bool int8 = std::string(r.kind) == "mxfp4_i8";
    const double peak = int8 ? int8_peak : f32_peak;
    lines.push_back(json{{"metric", "gemm_gmacs"},
                         {"kind", r.kind},
                         {"rows", r.shape.rows},
                         {"cols", r.shape.cols},
                         {"n", r.n},
                         {"threads", opt.threads},
                         {"value", round_to(r.gmacs, 100)},
                         {"unit", "GMAC/s"},
                         {"frac_of_peak", round_to(r.gmacs / peak, 10000)},
                         {"peak_metric", int8 ? int8_loop.metric : f32_loop.metric},
                         {"isa", kernel_isa},
                         {"calls", r.calls}});
  }
  return lines;
}

}  // namespace k3::tools
