// The decode-benchmark pieces `bench decode` and `bench hosts` share: JSON
// lines on stdout, medians, one timed greedy decode run on an expert source,
// an in-process expertd data plane (the same SegmentServer expertd runs) with
// a given slot budget, and reading every expert into it (warm).
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engined/model/model.h"
#include "expertd/segment_server.h"
#include "expertd/shard_set.h"
#include "shared/experts/expert_source.h"
#include "shared/status.h"

namespace k3::tools {

// One JSON line on stdout, flushed.
void emit(const nlohmann::json& j);

// The median (0 for none).
double median(std::vector<double> v);

// engined --speculate's value: auto, on, off.
engined::SpeculationMode speculation_mode(const std::string& s);

// Demand bytes the drive delivered: demand reads plus the reads speculation
// hid (speculative bytes themselves never count).
double demand_bytes(const experts::ExpertSourceStats& d, uint64_t expert_bytes);

// One decode run's figures.
struct DecodeRun {
  double s_per_token = 0;
  experts::ExpertSourceStats d;  // the run's expert stats (a delta over the timed steps)
};

// A fresh sequence: a prompt of `prompt_tokens` (1 to 3, chosen by `salt`;
// its experts are read untimed), then `tokens` greedy
// decode steps timed. `at_start` (if set) runs just before the first timed
// step and `at_end` just after the last, so callers can take their own
// counters over exactly the timed interval.
StatusOr<DecodeRun> decode_run(engined::Model& m, experts::ExpertSource& src, int tokens, int salt,
                               const std::function<void()>& at_start = {},
                               const std::function<void()>& at_end = {}, int prompt_tokens = 3);

// `n` fresh sequences decoded together, as the engine loop runs them: one
// Model::forward_batch per step with every sequence's next token (the
// routed experts fetched once for the union; with two or more sequences
// the engine's two groups offset by half a layer). Each sequence's prompt
// (`prompt_tokens`, chosen by `salt` and its index) runs untimed in one
// batch first; then `tokens` greedy steps are timed, `at_start` / `at_end`
// around them. s_per_token is seconds per step here (n tokens each).
StatusOr<DecodeRun> decode_batch_run(engined::Model& m, experts::ExpertSource& src, int n,
                                     int tokens, int salt,
                                     const std::function<void()>& at_start = {},
                                     const std::function<void()>& at_end = {},
                                     int prompt_tokens = 3);

// The drive's ceiling (drive_ceiling.h) on `shards`' expert read pattern,
// printed as a drive_ceiling_gbps line (`drive` direct or page_cache, `when`
// as given) and returned. O_DIRECT refused (tmpfs) falls back to buffered
// and the line says so (o_direct false). `extra` fields join the line.
StatusOr<nlohmann::json> ceiling_line(const expertd::ShardSet& shards, int queue_depth,
                                      uint64_t chunk, double seconds, bool direct, const char* when,
                                      const nlohmann::json& extra = nlohmann::json::object());

// An in-process expertd data plane on its own segment.
struct BenchServer {
  std::unique_ptr<expertd::SegmentServer> server;
  std::string segment;
};

struct BenchServerOptions {
  std::string tag;             // names the segment: k3bench-TAG-PID
  uint64_t slots = 2;          // expert slots (the cache)
  bool direct = true;          // O_DIRECT
  int queue_depth = 16;        // io_uring reads in flight
  uint64_t chunk = 4u << 20;   // read chunk
  double read_limit_mbps = 0;  // expertd --read-limit-mbps (0 = none)
};

StatusOr<BenchServer> start_bench_server(const expertd::ShardSet& shards,
                                         const BenchServerOptions& o);

// An engine-side source over the server's segment (shared memory).
StatusOr<std::unique_ptr<experts::ExpertSource>> shm_source(const BenchServer& s,
                                                            const engined::Model& m);

// Every expert `src` owns read once (the expertd behind it keeps what fits).
Status warm_all(experts::ExpertSource& src, const checkpoint::ModelConfig& c);

}  // namespace k3::tools
