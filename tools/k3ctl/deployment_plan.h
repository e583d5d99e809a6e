// The plan `k3ctl doctor` ends with, from what it measured: the cache to give
// expertd, the drives and their rates, the decode speed to expect from those
// rates, and which parts of the model fit in RAM.
//
// The arithmetic (decode is bound by expert bytes per token over the drives'
// bandwidth, docs/architecture.md "Scale"):
//   bytes per token   = MoE layers x top-k x bytes of one routed expert
//   cache share       = cache / every routed expert's bytes (uniform routing:
//                       real routing is skewed, so this is the floor of the hit rate)
//   s/token (reads)   = bytes per token x (1 - cache share) / (drives x slowest drive's rate)
//                       (shards spread evenly, as `k3ctl place` does: the slowest
//                       drive finishes last)
//
// A pure function of its inputs (thread-compatible).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace k3::tools {

struct PlanModel {
  std::string name;  // what the figures are of: the --model directory, or "Kimi K3"
  int64_t moe_layers = 0, experts = 0, top_k = 0;
  uint64_t expert_bytes = 0;
  std::optional<uint64_t> dense_bytes;  // at the chosen bits; absent without a config
  std::string dense_bits;               // "4/8/8"
  // The dense part at other bits, smallest first: ("4/8/8", bytes).
  std::vector<std::pair<std::string, uint64_t>> dense_options;

  // Kimi K3's published figures: 92 MoE layers of 896 experts of 17,547,264
  // bytes, top 16 (used when doctor has no --model).
  static PlanModel kimi_k3();
  uint64_t bytes_per_token() const;
  uint64_t expert_set_bytes() const;
};

struct PlanDrive {
  std::string dir;
  std::optional<double> gbps;  // absent: not measured
  std::string note;            // how it was measured, or why not
};

struct PlanInput {
  PlanModel model;
  uint64_t ram_total = 0, ram_available = 0;  // the cgroup's when it is tighter
  uint64_t segment_free = 0;                  // where expertd's segment lives
  std::string segment_dir;
  double cache_gb = 0;  // --cache-gb given to doctor (0: plan one)
  std::vector<PlanDrive> drives;
};

struct PlanLine {
  std::string name, detail;
  nlohmann::json fields;  // the same figures for --json
};

struct Plan {
  double cache_gb = 0;     // for all expertd together
  double cache_share = 0;  // of the routed experts' bytes
  std::optional<double> s_per_token;
  std::vector<PlanLine> lines;  // cache, drives, decode, ram
};

// RAM kept free beyond the dense part and the cache: KV caches, turn
// checkpoints, the page cache and the rest of the system.
uint64_t plan_reserve_bytes(uint64_t ram_total);

Plan make_plan(const PlanInput& in);

}  // namespace k3::tools
