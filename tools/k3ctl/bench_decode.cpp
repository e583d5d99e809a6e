// k3ctl bench decode: decode in the regime that matters (issue 11 item 7),
// next to its limits measured in the same run. JSON lines:
//   drive_ceiling_gbps     io_uring reads of the expert pattern, registered
//                          buffers and files (`when` before / after, `drive`
//                          direct = O_DIRECT, page_cache = buffered from a
//                          warm page cache: a fast "drive");
//   compute_bound          decode s/token with every expert resident in
//                          expertd's slots, warm;
//   decode                 decode s/token through expertd (a cache of at
//                          most a quarter of the experts, so reads happen),
//                          per drive, with hit rate and bytes read;
//   io_bound               demand expert bytes per token over that drive's
//                          read rate (speculative bytes never count);
//   ratio_to_max           decode / max(io_bound, compute_bound), per drive,
//                          with ratio_to_sum;
//   sequences              1 and 4 concurrent sequences through the engine
//                          loop: decode step time against the I/O bound of
//                          the union of their experts (the demand bytes
//                          those steps read; the prompts' are left out).
// Every decode figure is the median of --runs runs; run r of the compute
// bound and of each drive mode are taken one after the other, so drift over
// the benchmark falls on every figure alike.

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <thread>

#include "engined/experts/source_factory.h"
#include "engined/model/model.h"
#include "engined/serving/engine_loop.h"
#include "expertd/segment_server.h"
#include "expertd/shard_set.h"
#include "shared/base/log.h"
#include "tools/k3ctl/bench_decode_run.h"
#include "tools/k3ctl/commands.h"

namespace k3::tools {

using k3::checkpoint::Checkpoint;
using k3::checkpoint::ModelConfig;

using k3::experts::ExpertSource;
using k3::experts::ExpertSourceStats;

namespace {

struct DecodeOptions {
  std::string model;
  int tokens = 8;  // decode steps per run
  int runs = 3;
  double ceiling_seconds = 2;
  int queue_depth = 16;
  uint64_t chunk = 4u << 20;
  std::string speculate = "auto";
  int sequence_groups = 2;  // engined --sequence-groups
};

StatusOr<BenchServer> start_server(const expertd::ShardSet& shards, const DecodeOptions& o,
                                   const std::string& tag, uint64_t slots, bool direct) {
  BenchServerOptions bo;
  bo.tag = cat("decode-", tag);
  bo.slots = slots;
  bo.direct = direct;
  bo.queue_depth = o.queue_depth;
  bo.chunk = o.chunk;
  return start_bench_server(shards, bo);
}

// Reads every shard once, buffered, so the page cache holds them.
Status warm_page_cache(const Checkpoint& ck) {
  std::vector<char> buf(8u << 20);
  for (const std::string& f : ck.files()) {
    std::ifstream in(f, std::ios::binary);
    if (!in) return absl::NotFoundError(cat(f, ": cannot open"));
    while (in.read(buf.data(), static_cast<std::streamsize>(buf.size())) || in.gcount() > 0) {
    }
  }
  return absl::OkStatus();
}

// The drive's ceiling for a mode (drive_ceiling_gbps line).
StatusOr<nlohmann::json> ceiling(const expertd::ShardSet& shards, const DecodeOptions& o,
                                 bool direct, const char* when) {
  return ceiling_line(shards, o.queue_depth, o.chunk, o.ceiling_seconds, direct, when);
}

// Median decode figures over the runs of one source.
struct Decode {
  double s_per_token = 0;
  double bytes_read_per_token = 0;    // demand reads
  double demand_bytes_per_token = 0;  // demand reads + reads speculation hid
  double needed_bytes_per_token = 0;  // every expert the tokens used
  double hit_rate = 0;
  ExpertSourceStats total;
};

class DecodeRuns {
 public:
  void add(const DecodeRun& run, int tokens, uint64_t eb) {
    t_.push_back(run.s_per_token);
    read_.push_back(static_cast<double>(run.d.bytes_read) / tokens);
    demand_.push_back(demand_bytes(run.d, eb) / tokens);
    needed_.push_back(static_cast<double>(run.d.requests) * static_cast<double>(eb) / tokens);
    hits_.push_back(run.d.requests > 0 ? static_cast<double>(run.d.hits) / run.d.requests : 0.0);
    total_ += run.d;
  }
  Decode median_run() const {
    Decode out;
    out.s_per_token = median(t_);
    out.bytes_read_per_token = median(read_);
    out.demand_bytes_per_token = median(demand_);
    out.needed_bytes_per_token = median(needed_);
    out.hit_rate = median(hits_);
    out.total = total_;
    return out;
  }

 private:
  std::vector<double> t_, read_, demand_, needed_, hits_;
  ExpertSourceStats total_;
};

// Waits (up to 10 s) until the server has no read in flight, seen twice
// 2 ms apart (a queued read is submitted as soon as one completes).
void settle(const expertd::SegmentServer& server) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  int idle = 0;
  while (idle < 2 && std::chrono::steady_clock::now() < deadline) {
    idle = server.stats().queue_depth == 0 ? idle + 1 : 0;
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
}

// One way of serving the experts: an expertd over the shards (every expert
// resident and warm, or a quarter of them cached over one drive mode), the
// engine's source over its segment, its own speculator (swapped into the
// model for its runs: the lookahead is judged per source, as in its own
// engined) and its runs.
struct Drive {
  std::string name;  // resident, direct, page_cache
  bool direct = true;
  double ceiling_before = 0;  // GB/s (drives only)
  engined::Speculator speculator;
  BenchServer srv;
  std::unique_ptr<ExpertSource> src;
  DecodeRuns runs;
};

// What the loop's decode steps of one sequences run did: from the moment
// every request had its first token (their prefills done) to the end.
struct SequencesRun {
  ExpertSourceStats experts;  // expert stats of those steps
  double steps = 0;           // decode steps (tokens per request)
  double step_seconds = 0;    // their mean time
};

// Reads `h`'s events until one of kind `want` (kToken or kFinished):
// whether it came before the request's end; its failure or a stall is an
// error.
StatusOr<bool> read_until(engined::RequestHandle& h, engined::ServeEvent::Kind want) {
  for (;;) {
    engined::ServeEvent e;
    if (!h.next(&e, 600000))
      return absl::DeadlineExceededError("a benchmark request did not finish in 10 minutes");
    if (e.kind == engined::ServeEvent::Kind::kFailed) return e.status;
    if (e.kind == want) return true;
    if (e.kind == engined::ServeEvent::Kind::kFinished) return false;
  }
}

// `n` concurrent sequences through the engine loop, to the end. The figures
// cover the decode steps only: the prompts' reads (a prefill reads the union
// of its tokens' experts) would otherwise be spread over the steps and make
// the union's I/O bound look larger than what the steps read.
StatusOr<SequencesRun> run_sequences(engined::EngineLoop& loop, int n, int tokens, int salt) {
  const int32_t V = static_cast<int32_t>(loop.model().config().vocab_size);
  std::vector<std::shared_ptr<engined::RequestHandle>> hs;
  for (int i = 0; i < n; ++i) {
    engined::ServeRequest r;
    r.request_id = cat("bench-", salt, "-", i);
    r.prompt = {(3 + 13 * i + salt) % V, (5 + 17 * i) % V, (9 + 19 * i + 7 * salt) % V};
    r.max_tokens = tokens + 1;
    r.sampling.temperature = 0;
    K3_ASSIGN_OR_RETURN(auto h, loop.submit(std::move(r)));
    hs.push_back(std::move(h));
  }
  for (auto& h : hs) {
    K3_ASSIGN_OR_RETURN(const bool got, read_until(*h, engined::ServeEvent::Kind::kToken));
    if (!got) return absl::InternalError("a benchmark request ended before its first token");
  }
  const engined::EngineCounters before = loop.counters();
  const auto t0 = std::chrono::steady_clock::now();
  for (auto& h : hs)
    K3_RETURN_IF_ERROR(read_until(*h, engined::ServeEvent::Kind::kFinished).status());
  const double wall = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  const engined::EngineCounters after = loop.counters();
  SequencesRun out;
  out.experts = after.experts - before.experts;
  // The loop steps every request together: the steps since the snapshot are
  // the tokens each request made since, and they took the wall time since.
  out.steps = static_cast<double>(after.generated_tokens - before.generated_tokens) / n;
  out.step_seconds = out.steps > 0 ? wall / out.steps : 0.0;
  return out;
}

void run_bench_decode(const DecodeOptions& o) {
  base::set_log_level("warn");
  auto shards = expertd::ShardSet::open(o.model, {});
  if (!shards.ok()) return fail(msg(shards.status()));
  const ModelConfig& c = (*shards)->config();
  const uint64_t eb = (*shards)->index().expert_bytes();
  const uint64_t all = static_cast<uint64_t>(c.num_moe_layers() * c.num_experts);
  const uint64_t quarter = std::max<uint64_t>(2, all / 4);
  emit({{"metric", "expert_set"},
        {"experts", all},
        {"expert_bytes", eb},
        {"cache_experts", quarter},
        {"tokens", o.tokens},
        {"runs", o.runs},
        {"value", static_cast<double>(all * eb) / 1e9},
        {"unit", "GB"}});

  engined::EngineOptions eo;
  eo.speculation = speculation_mode(o.speculate);
  eo.sequence_groups = o.sequence_groups;

  // Ceilings first.
  auto direct_before = ceiling(**shards, o, true, "before");
  if (!direct_before.ok()) return fail(msg(direct_before.status()));
  if (Status s = warm_page_cache((*shards)->checkpoint()); !s.ok()) return fail(msg(s));
  auto cache_before = ceiling(**shards, o, false, "before");
  if (!cache_before.ok()) return fail(msg(cache_before.status()));

  // The compute bound (every expert resident in expertd's slots, warm) and
  // each drive mode with a quarter of the experts cached, run by run in
  // turn: the machine's drift (other tenants, clocks, the drive) falls on
  // every figure of a run alike, not on one figure of the ratio.
  std::vector<Drive> drives(3);
  drives[0].name = "resident";
  drives[1].name = "direct";
  drives[1].ceiling_before = (*direct_before)["value"].get<double>();
  drives[2].name = "page_cache";
  drives[2].direct = false;
  drives[2].ceiling_before = (*cache_before)["value"].get<double>();
  // One model (another would take RAM from the page cache the page_cache
  // drive reads from).
  auto model = engined::Model::load(o.model, {}, eo);
  if (!model.ok()) return fail(msg(model.status()));
  engined::Model& m = **model;
  for (Drive& d : drives) {
    d.speculator = engined::Speculator(eo.speculation);
    const bool resident = d.name == "resident";
    auto srv = start_server(**shards, o, d.name, resident ? all + 2 : quarter, d.direct);
    if (!srv.ok()) return fail(msg(srv.status()));
    d.srv = std::move(*srv);
    auto src = shm_source(d.srv, m);
    if (!src.ok()) return fail(msg(src.status()));
    d.src = std::move(*src);
    if (resident)
      if (Status st = warm_all(*d.src, c); !st.ok()) return fail(msg(st));
  }
  for (int r = 0; r < o.runs; ++r)
    for (Drive& d : drives) {
      std::swap(m.speculator(), d.speculator);
      auto run = decode_run(m, *d.src, o.tokens, r);
      std::swap(m.speculator(), d.speculator);
      if (!run.ok()) return fail(msg(run.status()));
      // The reads it left in flight (speculative ones) must not copy on the
      // cores of the next drive's run.
      settle(*d.srv.server);
      d.runs.add(*run, o.tokens, eb);
    }
  for (Drive& d : drives) {
    d.src.reset();
    d.srv.server->stop();
  }
  const Decode resident = drives[0].runs.median_run();
  const double compute_bound = resident.s_per_token;
  emit({{"metric", "compute_bound"},
        {"value", compute_bound},
        {"unit", "s/token"},
        {"hit_rate", resident.hit_rate}});

  double direct_rate = drives[1].ceiling_before;
  for (size_t i = 1; i < drives.size(); ++i) {
    const Drive& dr = drives[i];
    const bool direct = dr.direct;
    const std::string& drive = dr.name;  // direct or page_cache
    const Decode d = dr.runs.median_run();
    auto after = ceiling(**shards, o, direct, "after");
    if (!after.ok()) return fail(msg(after.status()));
    const double rate = (dr.ceiling_before + (*after)["value"].get<double>()) / 2;
    if (direct) direct_rate = rate;
    const double io_bound = rate > 0 ? d.demand_bytes_per_token / (rate * 1e9) : 0.0;
    emit(
        {{"metric", "decode"},
         {"drive", drive},
         {"value", d.s_per_token},
         {"unit", "s/token"},
         {"hit_rate", d.hit_rate},
         {"bytes_read_per_token", d.bytes_read_per_token},
         {"demand_bytes_per_token", d.demand_bytes_per_token},
         {"needed_bytes_per_token", d.needed_bytes_per_token},
         {"read_frac_of_needed",
          d.needed_bytes_per_token > 0 ? d.demand_bytes_per_token / d.needed_bytes_per_token : 0.0},
         {"speculative_bytes", d.total.speculative_bytes},
         {"speculative_hits", d.total.speculative_hits}});
    emit({{"metric", "io_bound"},
          {"drive", drive},
          {"value", io_bound},
          {"unit", "s/token"},
          {"read_gbps", rate}});
    const double bound = std::max(io_bound, compute_bound);
    emit({{"metric", "ratio_to_max"},
          {"drive", drive},
          {"value", bound > 0 ? d.s_per_token / bound : 0.0},
          {"ratio_to_sum",
           io_bound + compute_bound > 0 ? d.s_per_token / (io_bound + compute_bound) : 0.0},
          {"decode_s", d.s_per_token},
          {"io_bound_s", io_bound},
          {"compute_bound_s", compute_bound},
          {"unit", "ratio"}});
  }

  // 1 and 4 sequences through the serving path (the engine loop), O_DIRECT.
  {
    auto srv = start_server(**shards, o, "loop", quarter, true);
    if (!srv.ok()) return fail(msg(srv.status()));
    auto loop_model = engined::Model::load(o.model, {}, eo);
    if (!loop_model.ok()) return fail(msg(loop_model.status()));
    engined::EngineLoopOptions lo;
    lo.sessions = 4;
    lo.experts.expertd_segments = {srv->segment};
    auto loop = engined::EngineLoop::create(std::move(*loop_model), lo);
    if (!loop.ok()) return fail(msg(loop.status()));
    for (int n : {1, 4}) {
      std::vector<double> steps, union_bytes;
      for (int r = 0; r < o.runs; ++r) {
        auto s = run_sequences(**loop, n, o.tokens, r);
        if (!s.ok()) return fail(msg(s.status()));
        steps.push_back(s->step_seconds);
        union_bytes.push_back(s->steps > 0 ? demand_bytes(s->experts, eb) / s->steps : 0.0);
      }
      const double step = median(steps);
      const double io = direct_rate > 0 ? median(union_bytes) / (direct_rate * 1e9) : 0.0;
      emit({{"metric", "sequences"},
            {"drive", "direct"},
            {"sequences", n},
            {"sequence_groups", o.sequence_groups},
            {"value", step},
            {"unit", "s/step"},
            {"union_io_bound_s", io},
            {"union_bytes_per_step", median(union_bytes)},
            {"ratio_to_io_bound", io > 0 ? step / io : 0.0}});
    }
    loop->reset();
    srv->server->stop();
  }
}

void add_bench_decode(CLI::App& app) {
  auto o = std::make_shared<DecodeOptions>();
  auto* cmd = bench_command(app)->add_subcommand(
      "decode", "decode s/token through expertd against the drive's and the compute's bounds");
  cmd->add_option("--model", o->model, "model directory (a k3-slice checkpoint)")->required();
  cmd->add_option("--tokens", o->tokens, "decode steps per run")->check(CLI::Range(1, 100000));
  cmd->add_option("--runs", o->runs, "runs per figure (the median is printed)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--ceiling-seconds", o->ceiling_seconds, "seconds per drive-ceiling measurement")
      ->check(CLI::Range(0.1, 600.0));
  cmd->add_option("--queue-depth", o->queue_depth, "expertd's and the ceiling's io_uring depth")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--speculate", o->speculate, "engined --speculate: auto, on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->add_option("--sequence-groups", o->sequence_groups,
                  "engined --sequence-groups for the concurrent sequences: 1 or 2 groups")
      ->check(CLI::IsMember({1, 2}));
  cmd->callback([o] { run_bench_decode(*o); });
}

const CommandRegistrar kBenchDecode(add_bench_decode);

}  // namespace
}  // namespace k3::tools
