// `k3ctl bench kernels [--threads N] [--seconds S] [--gemm-only]`: this
// machine's memory read bandwidth and the streaming rate of the matrix kernels
// on matrices that are not in cache, then its compute peaks and the GEMM
// throughput of the batched kernels, in one run, as JSON lines on stdout:
//   {"metric":"mem_read_gbps","threads":2,"value":14.1,"unit":"GB/s",...}
//   {"metric":"mxfp4_i8_matvec_gbps","rows":4096,"cols":14336,"n":1,"threads":2,
//    "value":12.9,"unit":"GB/s","frac_of_mem_read":0.91,"isa":"avx512",...}
// Every kernel line has "n", the token rows per call (1 for the matvecs), and
// "isa", the kernel variant in use (K3_KERNELS). The batched MXFP4 kernels
// (mxfp4_{i8,f32}_matmul_gbps, the routed-expert shapes, n = 1, 4, 8, 16, 32)
// keep "value" = GB/s of weight bytes per call and add "token_rows_per_s"
// (n calls' worth of matvec work per second) and "vs_n1", that rate over the
// n = 1 line of the same kernel and shape; the five n of a kernel and shape are
// measured in the same passes, interleaved, so vs_n1 compares rates taken
// under the same load from other processes.
// Rates are stored bytes (MXFP4: packed + scales; dense: weights + scales)
// per second over >= 512 MiB of distinct copies (the LLC is cycled through
// many times), each copy at its best of several passes (see best_gbps).
// Threads split rows as the engine does (kernels::parallel_rows; the kernels
// open no parallel region). Activations are quantized once (quantize_q8_32 is not
// timed; DenseMatrix::matvec's own int4 x permutation is). mem_read_gbps
// (1 GiB in 32 MiB pieces, 32-byte loads summed, timed the same way) is
// measured before and after the kernels and the best is kept, so
// frac_of_mem_read stays conservative on a shared machine; all lines are
// printed at the end. Last, expert_xxh3_128_gbps: the hash expertd
// --manifest computes on every expert read, one thread, per 17.5 MB expert.
//
// Targets (frac_of_mem_read): the q8 MXFP4 kernel (the decode path for the
// routed experts) >= 0.85 of the measured read bandwidth; for comparison, a
// well-known engine's MXFP4 CPU kernel reaches ~0.72. The dense int8/int4
// dots and the f32-activation MXFP4 kernel: as close as they get (they do
// more work per byte: f32 activations). Batched q8 at n = 8: vs_n1 >= 4.
//
// Compute (tools/k3ctl/bench_gemm.h), measured after the above and printed
// last:
//   {"metric":"int8_peak_gmacs","threads":2,"value":920,"unit":"GMAC/s",
//    "isa":"avx512_vnni","instr":"vpdpbusd zmm"}
//   {"metric":"f32_peak_gmacs",...,"isa":"avx512f","instr":"vfmadd231ps zmm"}
//   {"metric":"gemm_gmacs","kind":"mxfp4_i8","rows":3072,"cols":3584,"n":256,
//    "threads":2,"value":95,"unit":"GMAC/s","frac_of_peak":0.1033,
//    "peak_metric":"int8_peak_gmacs","isa":"avx512","calls":15}
// The peaks are register-only multiply-add loops on all threads (the widest
// instruction the CPU has, named by "instr"; one MAC per u8 x s8 product or
// f32 lane). gemm_gmacs: rows * cols * n MACs per call over the best call
// time, one matrix per shape (weights reused, so n = 256 is compute-bound),
// rows split by kernels::parallel_rows as the engine splits them; kinds
// dense_int4 and dense_int8 (DenseMatrix::matmul, f32 activations, shapes
// 12288 x 7168, 18432 x 7168, 7168 x 12288) against f32_peak_gmacs, and
// mxfp4_i8 (mxfp4_matmul_q8, activations quantized before the timing, shapes
// 3072 x 3584, 3584 x 3072) against int8_peak_gmacs; n = 32 and 256.
// --gemm-only prints only these lines (the tests run it).
//
// Targets (issue 26), gemm_gmacs at n = 256: mxfp4_i8 >= 0.5 x
// int8_peak_gmacs; dense_int4 and dense_int8 >= 0.5 x f32_peak_gmacs.
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <vector>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

#include "shared/base/cpu_features.h"
#include "shared/base/hash.h"
#include "shared/kernels/dense.h"
#include "shared/kernels/mxfp4.h"
#include "shared/kernels/parallel_rows.h"
#include "tools/k3ctl/bench_gemm.h"
#include "tools/k3ctl/commands.h"

namespace k3::tools {
namespace {

using kernels::DenseMatrix;
using kernels::Mxfp4Matrix;

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kReadBufferBytes = 1024 * kMiB;  // mem_read_gbps
constexpr size_t kMinWorkingSet = 512 * kMiB;     // per kernel measurement

struct BenchFlags {
  int threads = 0;  // 0: omp_get_max_threads()
  double seconds = 1.0;
  bool gemm_only = false;  // only the peak and gemm_gmacs lines
};

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// 64-byte aligned, untouched until filled.
struct AlignedBuffer {
  explicit AlignedBuffer(size_t n)
      : bytes(n), data(static_cast<uint8_t*>(std::aligned_alloc(64, (n + 63) / 64 * 64))) {}
  ~AlignedBuffer() { std::free(data); }
  AlignedBuffer(const AlignedBuffer&) = delete;
  AlignedBuffer& operator=(const AlignedBuffer&) = delete;
  size_t bytes;
  uint8_t* data;
};

// Fills with pseudo-random bytes, in parallel (first touch spreads the pages).
void fill_random(uint8_t* p, size_t n, int threads) {
#pragma omp parallel for num_threads(threads) schedule(static)
  for (size_t i = 0; i < n / 8; ++i) {
    uint64_t z = (i + 1) * 0x9e3779b97f4a7c15ull;  // splitmix64
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    z ^= z >> 31;
    std::memcpy(p + 8 * i, &z, 8);
  }
  for (size_t i = n / 8 * 8; i < n; ++i) p[i] = static_cast<uint8_t>(i);
}

// Sum of the buffer as 64-bit lanes: four independent 32-byte loads per step.
#if defined(__x86_64__)
__attribute__((target("avx2"))) uint64_t read_sum_avx2(const uint8_t* p, size_t n) {
  __m256i a0 = _mm256_setzero_si256(), a1 = a0, a2 = a0, a3 = a0;
  for (size_t i = 0; i + 128 <= n; i += 128) {
    a0 = _mm256_add_epi64(a0, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i)));
    a1 = _mm256_add_epi64(a1, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 32)));
    a2 = _mm256_add_epi64(a2, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 64)));
    a3 = _mm256_add_epi64(a3, _mm256_load_si256(reinterpret_cast<const __m256i*>(p + i + 96)));
  }
  const __m256i s = _mm256_add_epi64(_mm256_add_epi64(a0, a1), _mm256_add_epi64(a2, a3));
  alignas(32) uint64_t lanes[4];
  _mm256_store_si256(reinterpret_cast<__m256i*>(lanes), s);
  return lanes[0] + lanes[1] + lanes[2] + lanes[3];
}
#endif

uint64_t read_sum_plain(const uint8_t* p, size_t n) {
  uint64_t a[8] = {};
  for (size_t i = 0; i + 64 <= n; i += 64)
    for (int j = 0; j < 8; ++j) {
      uint64_t v;
      std::memcpy(&v, p + i + 8 * j, 8);
      a[j] += v;
    }
  uint64_t s = 0;
  for (uint64_t v : a) s += v;
  return s;
}

// Rate of processing `items` pieces of `bytes` in total: every piece is timed
// on its own (one OpenMP region each, as the engine runs one matrix), over
// passes repeated for `seconds` (at least 3, after an untimed warm-up pass);
// the rate is bytes / (sum over pieces of each piece's best time). On a
// shared machine this filters out the passes where another process took a
// core away (a 2-thread region then waits a whole time slice), while every
// piece is still read cold (the pieces cycle through >= 512 MiB).
double best_gbps(size_t bytes, int items, double seconds, const std::function<void(int)>& run) {
  std::vector<double> best(static_cast<size_t>(items), 1e30);
  for (int i = 0; i < items; ++i) run(i);
  const double start = now_s();
  for (int pass = 0; pass < 3 || now_s() - start < seconds; ++pass)
    for (int i = 0; i < items; ++i) {
      const double t0 = now_s();
      run(i);
      best[static_cast<size_t>(i)] = std::min(best[static_cast<size_t>(i)], now_s() - t0);
    }
  double total = 0;
  for (double t : best) total += t;
  return static_cast<double>(bytes) / total / 1e9;
}

// best_gbps for several kernels measured together: every pass runs each
// kernel over all pieces in turn, so a burst of load from other processes
// hits all of them alike and their ratios (vs_n1) stay meaningful on a shared
// machine. Returns the rate of each kernel, as best_gbps computes it.
std::vector<double> best_gbps_interleaved(size_t bytes, int items, double seconds,
                                          const std::vector<std::function<void(int)>>& runs) {
  const size_t k = runs.size();
  std::vector<double> best(k * static_cast<size_t>(items), 1e30);
  for (const auto& run : runs)
    for (int i = 0; i < items; ++i) run(i);
  const double start = now_s();
  for (int pass = 0; pass < 3 || now_s() - start < seconds * static_cast<double>(k); ++pass)
    for (size_t f = 0; f < k; ++f)
      for (int i = 0; i < items; ++i) {
        const double t0 = now_s();
        runs[f](i);
        double& b = best[f * static_cast<size_t>(items) + static_cast<size_t>(i)];
        b = std::min(b, now_s() - t0);
      }
  std::vector<double> out(k);
  for (size_t f = 0; f < k; ++f) {
    double total = 0;
    for (int i = 0; i < items; ++i)
      total += best[f * static_cast<size_t>(items) + static_cast<size_t>(i)];
    out[f] = static_cast<double>(bytes) / total / 1e9;
  }
  return out;
}

volatile uint64_t g_sink;  // keeps the read sums alive

double measure_mem_read(const BenchFlags& f) {
  AlignedBuffer buf(kReadBufferBytes);
  fill_random(buf.data, buf.bytes, f.threads);
  const bool avx2 = base::cpu_supports_avx2();
  constexpr size_t kPiece = 32 * kMiB;  // about one MXFP4 matrix
  const int pieces = static_cast<int>(buf.bytes / kPiece);
  return best_gbps(buf.bytes, pieces, f.seconds, [&](int piece) {
    uint64_t total = 0;
#pragma omp parallel num_threads(f.threads) reduction(+ : total)
    {
      const size_t n = static_cast<size_t>(omp_get_num_threads());
      const size_t t = static_cast<size_t>(omp_get_thread_num());
      const size_t lines = kPiece / 128;
      const size_t c0 = lines * t / n, c1 = lines * (t + 1) / n;
      const uint8_t* p = buf.data + kPiece * static_cast<size_t>(piece) + 128 * c0;
#if defined(__x86_64__)
      total += avx2 ? read_sum_avx2(p, 128 * (c1 - c0)) : read_sum_plain(p, 128 * (c1 - c0));
#else
      (void)avx2;
      total += read_sum_plain(p, 128 * (c1 - c0));
#endif
    }
    g_sink = total;
  });
}

struct Shape {
  int64_t rows, cols;
};

// One kernel measurement; printed once the read bandwidth is final.
struct Result {
  const char* metric;
  Shape shape;
  double gbps;
  int copies;
  size_t bytes_per_copy;
  int64_t n = 1;       // token rows per call
  double vs_n1 = 0.0;  // batched lines: token rows/s over the n = 1 line's
};

void print_result(const Result& r, const BenchFlags& f, double mem_gbps) {
  const auto round3 = [](double v) { return std::round(v * 1000) / 1000; };
  nlohmann::json j = {{"metric", r.metric},
                      {"rows", r.shape.rows},
                      {"cols", r.shape.cols},
                      {"n", r.n},
                      {"threads", f.threads},
                      {"value", std::round(r.gbps * 100) / 100},
                      {"unit", "GB/s"},
                      {"frac_of_mem_read", round3(r.gbps / mem_gbps)},
                      {"kernels", std::string(base::kernel_isa_name(base::kernel_isa()))},
                      {"isa", std::string(base::kernel_isa_name(base::kernel_isa()))},
                      {"copies", r.copies},
                      {"mib_per_copy", round3(static_cast<double>(r.bytes_per_copy) / kMiB)}};
  if (r.vs_n1 > 0) {
    const double calls_per_s = r.gbps * 1e9 / static_cast<double>(r.bytes_per_copy);
    j["token_rows_per_s"] = std::round(calls_per_s * static_cast<double>(r.n) * 10) / 10;
    j["vs_n1"] = round3(r.vs_n1);
  }
  std::printf("%s\n", j.dump().c_str());
}

// The batched kernels on the routed-expert shapes: n token rows per call.
void bench_mxfp4_batched(const BenchFlags& f, const Shape& s, const std::vector<Mxfp4Matrix>& mats,
                         int copies, size_t per, std::vector<Result>& out) {
  constexpr int64_t kMaxN = 32;
  const int64_t groups = s.cols / 32;
  std::vector<float> X(static_cast<size_t>(kMaxN * s.cols)), Y(static_cast<size_t>(kMaxN * s.rows));
  for (size_t i = 0; i < X.size(); ++i) X[i] = static_cast<float>((i * 7919) % 2001) / 1000 - 1;
  std::vector<int8_t> Xq(X.size());
  std::vector<float> Xs(static_cast<size_t>(kMaxN * groups));
  for (int64_t t = 0; t < kMaxN; ++t)
    kernels::quantize_q8_32(X.data() + t * s.cols, s.cols, Xq.data() + t * s.cols,
                            Xs.data() + t * groups);
  const int64_t ns[] = {1, 4, 8, 16, 32};
  for (int kind = 0; kind < 2; ++kind) {
    // All n measured in the same passes (best_gbps_interleaved): vs_n1
    // compares rates taken under the same load.
    std::vector<std::function<void(int)>> runs;
    for (int64_t n : ns)
      runs.push_back([&, n, kind](int c) {
        kernels::parallel_rows(
            s.rows, s.cols * n, n,
            [&](int64_t r0, int64_t r1) {
              if (kind == 0)
                kernels::mxfp4_matmul_q8(mats[c], Xq.data(), s.cols, Xs.data(), groups, n, Y.data(),
                                         s.rows, r0, r1);
              else
                kernels::mxfp4_matmul_f32(mats[c], X.data(), s.cols, n, Y.data(), s.rows, r0, r1);
            },
            f.threads);
      });
    const std::vector<double> gbps = best_gbps_interleaved(per * copies, copies, f.seconds, runs);
    for (size_t i = 0; i < gbps.size(); ++i)
      out.push_back({kind == 0 ? "mxfp4_i8_matmul_gbps" : "mxfp4_f32_matmul_gbps", s, gbps[i],
                     copies, per, ns[i], gbps[i] * static_cast<double>(ns[i]) / gbps[0]});
  }
}

// MXFP4 matrices: `copies` back-to-back [packed | scales] images in one arena.
void bench_mxfp4(const BenchFlags& f, std::vector<Result>& out) {
  const Shape shapes[] = {{3072, 3584}, {3584, 3072}, {4096, 14336}};
  size_t arena_bytes = 0;
  for (const Shape& s : shapes) {
    const size_t per = static_cast<size_t>(s.rows * s.cols / 2 + s.rows * s.cols / 32);
    arena_bytes = std::max(arena_bytes, (kMinWorkingSet + per - 1) / per * per);
  }
  AlignedBuffer arena(arena_bytes);
  fill_random(arena.data, arena.bytes, f.threads);
  for (const Shape& s : shapes) {
    const size_t packed = static_cast<size_t>(s.rows * s.cols / 2);
    const size_t per = packed + static_cast<size_t>(s.rows * s.cols / 32);
    const int copies = static_cast<int>(arena.bytes / per);
    std::vector<Mxfp4Matrix> mats;
    for (int c = 0; c < copies; ++c) {
      uint8_t* base = arena.data + per * c;
      // Scales 2^-9 .. 2^-2 (realistic; keeps the sums finite).
      for (size_t i = packed; i < per; ++i) base[i] = static_cast<uint8_t>(118 + base[i] % 8);
      mats.push_back({base, base + packed, s.rows, s.cols});
    }
    std::vector<float> x(static_cast<size_t>(s.cols)), y(static_cast<size_t>(s.rows));
    for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 2001) / 1000 - 1;
    std::vector<int8_t> xq(x.size());
    std::vector<float> xs(x.size() / 32);
    kernels::quantize_q8_32(x.data(), s.cols, xq.data(), xs.data());
    const double q8 = best_gbps(per * copies, copies, f.seconds, [&](int c) {
      kernels::parallel_rows(
          s.rows, s.cols, 1,
          [&](int64_t r0, int64_t r1) {
            kernels::mxfp4_matvec_q8(mats[c], xq.data(), xs.data(), y.data(), r0, r1);
          },
          f.threads);
    });
    out.push_back({"mxfp4_i8_matvec_gbps", s, q8, copies, per});
    const double f32 = best_gbps(per * copies, copies, f.seconds, [&](int c) {
      kernels::parallel_rows(
          s.rows, s.cols, 1,
          [&](int64_t r0, int64_t r1) {
            kernels::mxfp4_matvec_f32(mats[c], x.data(), y.data(), r0, r1);
          },
          f.threads);
    });
    out.push_back({"mxfp4_f32_matvec_gbps", s, f32, copies, per});
    if (s.cols != 14336) bench_mxfp4_batched(f, s, mats, copies, per, out);
  }
}

void bench_dense(const BenchFlags& f, std::vector<Result>& out) {
  const Shape shapes[] = {{4096, 14336}, {7168, 7168}};
  for (const Shape& s : shapes)
    for (int bits : {8, 4}) {
      // One quantized matrix (from pseudo-random rows), then copies of it.
      DenseMatrix first(bits, s.rows, s.cols);
      {
        constexpr int64_t kRowsPerStep = 64;
        std::vector<float> src(static_cast<size_t>(kRowsPerStep * s.cols));
        for (int64_t r0 = 0; r0 < s.rows; r0 += kRowsPerStep) {
          const int64_t n = std::min(kRowsPerStep, s.rows - r0);
          for (size_t i = 0; i < static_cast<size_t>(n * s.cols); ++i)
            src[i] = static_cast<float>(((r0 * s.cols + static_cast<int64_t>(i)) * 40503) % 2001) /
                         1000 -
                     1;
          first.set_rows(r0, n, src.data());
        }
      }
      const size_t per = first.bytes();
      const int copies = static_cast<int>((kMinWorkingSet + per - 1) / per);
      std::vector<std::unique_ptr<DenseMatrix>> mats;
      for (int c = 0; c < copies; ++c) mats.push_back(std::make_unique<DenseMatrix>(first));
      std::vector<float> x(static_cast<size_t>(s.cols)), y(static_cast<size_t>(s.rows));
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<float>((i * 7919) % 2001) / 1000 - 1;
      const double gbps = best_gbps(per * copies, copies, f.seconds, [&](int c) {
        kernels::parallel_rows(
            s.rows, s.cols, 1,
            [&](int64_t r0, int64_t r1) { mats[c]->matvec(x.data(), y.data(), r0, r1); },
            f.threads);
      });
      out.push_back(
          {bits == 8 ? "dense_i8_matvec_gbps" : "dense_i4_matvec_gbps", s, gbps, copies, per});
    }
}

// What expertd --manifest adds to every expert read: XXH3-128 of one
// routed expert (the real model's 17,547,264 bytes) on one thread, over
// distinct copies so it streams from RAM like a freshly read slot.
void print_expert_hash_line(const BenchFlags& f, double mem) {
  constexpr size_t kExpertBytes = 17547264, kCopies = 16;  // 281 MB
  std::vector<uint8_t> buf(kExpertBytes * kCopies);
  for (size_t i = 0; i < buf.size(); i += 4096) buf[i] = static_cast<uint8_t>(i >> 12);
  double best = 0;
  uint64_t sink = 0;
  const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(f.seconds);
  do {
    const auto t0 = std::chrono::steady_clock::now();
    for (size_t c = 0; c < kCopies; ++c)
      sink ^= base::xxh3_128(buf.data() + c * kExpertBytes, kExpertBytes).lo;
    const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    best = std::max(best, static_cast<double>(buf.size()) / s / 1e9);
  } while (std::chrono::steady_clock::now() < until);
  std::printf("%s\n", nlohmann::json({{"metric", "expert_xxh3_128_gbps"},
                                      {"threads", 1},
                                      {"value", std::round(best * 100) / 100},
                                      {"unit", "GB/s"},
                                      {"ms_per_expert", kExpertBytes / best / 1e6},
                                      {"expert_bytes", kExpertBytes},
                                      {"frac_of_mem_read", best / mem},
                                      {"check", sink & 1}})
                          .dump()
                          .c_str());
}

void run_bench_kernels(BenchFlags f) {
  if (f.threads <= 0) f.threads = omp_get_max_threads();
  const GemmBenchOptions gemm{f.threads, f.seconds};
  if (f.gemm_only) {
    for (const nlohmann::json& j : bench_gemm(gemm)) std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
    return;
  }
  // The read bandwidth is measured before and after the kernels and the best
  // is kept: on a shared machine this keeps frac_of_mem_read conservative.
  const double mem_before = measure_mem_read(f);
  std::vector<Result> results;
  bench_mxfp4(f, results);
  bench_dense(f, results);
  const double mem = std::max(mem_before, measure_mem_read(f));
  const std::vector<nlohmann::json> gemm_lines = bench_gemm(gemm);
  std::printf("%s\n", nlohmann::json({{"metric", "mem_read_gbps"},
                                      {"threads", f.threads},
                                      {"value", std::round(mem * 100) / 100},
                                      {"unit", "GB/s"},
                                      {"mib", kReadBufferBytes / kMiB}})
                          .dump()
                          .c_str());
  for (const Result& r : results) print_result(r, f, mem);
  print_expert_hash_line(f, mem);
  for (const nlohmann::json& j : gemm_lines) std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

void add_bench_kernels_command(CLI::App& app) {
  auto flags = std::make_shared<BenchFlags>();
  auto* cmd = bench_command(app)->add_subcommand(
      "kernels",
      "memory read bandwidth, MXFP4/dense matvec GB/s, compute peaks and GEMM GMAC/s (JSON lines)");
  cmd->add_option("--threads", flags->threads, "OpenMP threads (default: all)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--seconds", flags->seconds, "time per measurement (default 1)")
      ->check(CLI::Range(0.01, 600.0));
  cmd->add_flag("--gemm-only", flags->gemm_only,
                "print only the int8/f32 peak and gemm_gmacs lines (skips the bandwidth lines)");
  cmd->callback([flags] { run_bench_kernels(*flags); });
}

const CommandRegistrar kBenchKernels(add_bench_kernels_command);

}  // namespace
}  // namespace k3::tools
