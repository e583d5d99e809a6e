// Compute peaks and GEMM throughput, for `k3ctl bench kernels`
// (tools/k3ctl/bench_kernels.cpp prints the lines with its own):
//   {"metric":"int8_peak_gmacs","threads":2,"value":V,"unit":"GMAC/s",
//    "isa":"avx512_vnni","instr":"vpdpbusd zmm"}
//   {"metric":"f32_peak_gmacs",...,"isa":"avx512f","instr":"vfmadd231ps zmm"}
//   {"metric":"gemm_gmacs","kind":"dense_int8","rows":12288,"cols":7168,"n":256,
//    "threads":2,"value":V,"unit":"GMAC/s","frac_of_peak":0.41,
//    "peak_metric":"f32_peak_gmacs","isa":"avx512"}
// The peaks are register-only loops (no memory operand) on every thread: what
// this CPU's widest multiply-add instruction can do, whatever K3_KERNELS picks
// for the kernels. The gemm_gmacs lines time the engine's batched kernels
// (DenseMatrix::matmul, mxfp4_matmul_q8) on n token rows per call, split into
// row ranges by kernels::parallel_rows as the engine splits them; "isa" there
// is the kernel variant in use.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <vector>

namespace k3::tools {

struct GemmBenchOptions {
  int threads = 1;     // OpenMP threads, >= 1
  double seconds = 1;  // each gemm shape and n is timed for about seconds / 2
};

// Measures the two peaks, then every gemm_gmacs kind, shape and n (32 and
// 256 token rows per call), then the peaks again (the best of both is kept,
// so frac_of_peak stays conservative on a shared machine). Returns the JSON
// lines, peaks first, unprinted. Not thread-safe (opens OpenMP regions).
std::vector<nlohmann::json> bench_gemm(const GemmBenchOptions& opt);

}  // namespace k3::tools
