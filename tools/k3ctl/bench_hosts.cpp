// k3ctl bench hosts: decode with the routed experts on one remote expertd
// host, then on two holding half each (issue 10 part 6), every host's drive
// reads capped at the same rate so reads are the bound, for each
// --sequences N (default 1 and 4): N sequences decoded together, one
// Model::forward_batch per step as the engine loop runs them (N >= 2 in two
// groups offset by half a layer, --sequence-groups). --layouts replicas adds
// two hosts that each hold every expert, the placement splitting each layer
// step's experts evenly between them (the decode, speedup and network lines
// carry `layout`: all for one host, half or replicas). Every line carries
// `sequences` (N, or the list for the lines all N share). JSON lines:
//   placement              `k3ctl place --apply` of the experts over two host
//                          directories (evenly per layer; resumed when kept);
//   compute_bound          per N: s/step through one remote host with every
//                          expert the runs use resident (warm): no reads;
//                          and one step's union of experts over the batch;
//   drive_ceiling_gbps     the drive's O_DIRECT ceiling on the expert read
//                          pattern (bench decode's), which every host here
//                          shares;
//   read_limit             the per-host cap (--read-limit-mbps) chosen so one
//                          host's I/O bound (a step's union) is at least
//                          --io-factor times the compute bound (at least 2)
//                          for every N, lowered further when needed so the
//                          hosts together take at most --drive-frac of the
//                          drive's ceiling (else the shared drive, not the
//                          limit, would be the bound);
//   expert_bytes_per_token top-k x MoE layers x expert size (the experts the
//                          tokens used);
//   decode                 per N and host count: s/step, s/token, tokens/s
//                          (N / step), hit rates, the hosts' caches (below
//                          their share of one step's union, so every step
//                          reads; O_DIRECT) and bytes read, against the I/O
//                          bound of the slowest host and the
//                          layer-synchronous one (each layer request waits
//                          for the host owning most of its experts:
//                          slowest_host_share of the union);
//   hosts_speedup          per N: tokens/s of 2 hosts over 1 host (target
//                          >= 1.8), with that of the layer-synchronous
//                          bounds;
//   network_bytes_per_token, per N and host count: the bytes on the link,
//                          both directions, as the loopback interface
//                          counts them (value), next to the stream bytes the
//                          engine and the hosts count, the experts the tokens
//                          used and the batch's union per token (once per
//                          step, over its N tokens);
//   network_over_expert_bytes  per N and host count: link bytes over the
//                          experts the tokens used (target <= 0.01), and
//                          over the union's.
// Every figure is the median of --runs runs.
//
// The hosts are expertd's own data plane and remote listener in this process
// (bench_hosts_cluster.h); the engine talks to them over TCP on loopback
// through RemoteExpertSource, exactly as engined --remote-expertd does, and
// StepCounter (step_counter.h) counts each layer step's busiest host. The process
// first moves into a private network namespace, so its loopback carries only
// the benchmark's connections and the interface counters are exact on a
// shared machine; each packet crosses lo once and is counted in both its tx
// and its rx bytes, so tx alone is the link's bytes in both directions. When
// the kernel refuses the namespace, the host's lo is counted and the line
// says so (other local traffic is then included).
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>

#include "engined/experts/source_factory.h"
#include "engined/model/model.h"
#include "expertd/shard_set.h"
#include "shared/base/log.h"
#include "shared/base/scratch_dir.h"
#include "shared/base/subprocess.h"
#include "tools/k3ctl/bench_decode_run.h"
#include "tools/k3ctl/bench_hosts_cluster.h"
#include "tools/k3ctl/commands.h"
#include "tools/k3ctl/link_counters.h"
#include "tools/k3ctl/step_counter.h"

namespace k3::tools {

using k3::experts::ExpertSource;

namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

struct HostsOptions {
  std::string model;
  std::string work_dir;  // where the two hosts' directories are placed ("" = scratch)
  int tokens = 8;        // decode steps per run
  int runs = 3;
  int prompt_tokens = 1;    // per run, untimed (its reads are read-limited too)
  double io_factor = 10;    // one host's I/O bound over the compute bound
  double cache_frac = 0.5;  // a host's cache over its share of one step's experts
  double drive_frac = 0.5;  // the share of the drive's ceiling all hosts' limits may take
  double ceiling_seconds = 2;
  int queue_depth = 16;
  std::string speculate = "off";
  std::vector<int> sequences = {1, 4};  // decoded together, per figure
  int sequence_groups = 2;              // engined --sequence-groups
  // Two-host layouts: half (each holds half of every layer's experts, as
  // k3ctl place lays them out) and replicas (each holds every expert; the
  // placement splits each layer step's experts evenly between them).
  std::vector<std::string> layouts = {"half"};
};

// The medians of --runs decode runs on `hosts`, `sequences` decoded
// together: per step (one token of each) or per token (a step over
// `sequences`).
struct HostsDecode {
  double s_per_step = 0;
  double hit_rate = 0;
  std::vector<double> host_hit_rates, host_bytes_read_per_token;
  double bytes_read_per_token = 0;
  double requests_per_token = 0;        // experts asked for (per layer request) per token
  double stream_requests_per_step = 0;  // stream messages the engine sent per step
  double lo_tx_per_token = 0, lo_rx_per_token = 0;
  double engine_stream_bytes_per_token = 0, host_stream_bytes_per_token = 0;
  std::vector<double> host_bytes_read_per_step;
  // Per step, summed over its layers: the experts of the host with the most
  // (per layer request), and the union of the batch's experts.
  double slowest_host_experts_per_step = 0, union_experts_per_step = 0;
  double slowest_host_share = 0;  // ... over the union
  bool direct = true;
};

StatusOr<HostsDecode> decode_hosts(engined::Model& m, ExpertSource& src,
                                   const std::vector<std::unique_ptr<BenchHost>>& hosts,
                                   const HostsOptions& o, int sequences, bool replicas = false) {
  const size_t n = hosts.size();
  std::vector<double> t, hit, read, req, msgs, tx, rx, eng, hst, slow, uni, share;
  StepCounter counter(
      src, hosts.size(),
      [&hosts](size_t h, int64_t layer, int64_t expert) {
        return hosts[h]->shards->owns(layer, expert);
      },
      replicas);
  std::vector<std::vector<double>> host_hit(n), host_read(n);
  HostsDecode out;
  for (int r = 0; r < o.runs; ++r) {
    std::vector<BenchHostCounts> before(n), after(n);
    LinkCounters lo0, lo1;
    Status link = absl::OkStatus();
    auto at_start = [&] {
      for (size_t i = 0; i < n; ++i) before[i] = bench_host_counts(*hosts[i]);
      counter.count(true);
      auto c = read_link_counters("lo");
      if (c.ok())
        lo0 = *c;
      else
        link = c.status();
    };
    auto at_end = [&] {
      auto c = read_link_counters("lo");
      if (c.ok())
        lo1 = *c;
      else
        link = c.status();
      for (size_t i = 0; i < n; ++i) after[i] = bench_host_counts(*hosts[i]);
      counter.count(false);
    };
    StatusOr<DecodeRun> ran =
        sequences == 1 ? decode_run(m, counter, o.tokens, r, at_start, at_end, o.prompt_tokens)
                       : decode_batch_run(m, counter, sequences, o.tokens, r, at_start, at_end,
                                          o.prompt_tokens);
    if (!ran.ok()) return ran.status();
    const DecodeRun& run = *ran;
    K3_RETURN_IF_ERROR(link);
    const double steps = o.tokens;
    const double T = steps * sequences;  // tokens
    uint64_t requests = 0, hits = 0, bytes = 0, stream = 0;
    for (size_t i = 0; i < n; ++i) {
      const uint64_t q = after[i].requests - before[i].requests;
      const uint64_t h = after[i].hits - before[i].hits;
      const uint64_t b = after[i].bytes_read - before[i].bytes_read;
      requests += q;
      hits += h;
      bytes += b;
      stream += after[i].stream_bytes - before[i].stream_bytes;
      host_hit[i].push_back(q > 0 ? static_cast<double>(h) / static_cast<double>(q) : 0.0);
      host_read[i].push_back(static_cast<double>(b) / steps);
      out.direct = out.direct && after[i].direct;
    }
    t.push_back(run.s_per_token);
    hit.push_back(requests > 0 ? static_cast<double>(hits) / static_cast<double>(requests) : 0.0);
    read.push_back(static_cast<double>(bytes) / T);
    req.push_back(static_cast<double>(run.d.requests) / T);
    msgs.push_back(static_cast<double>(run.d.remote_messages) / steps);
    tx.push_back(static_cast<double>(lo1.tx_bytes - lo0.tx_bytes) / T);
    rx.push_back(static_cast<double>(lo1.rx_bytes - lo0.rx_bytes) / T);
    eng.push_back(static_cast<double>(run.d.network_bytes) / T);
    hst.push_back(static_cast<double>(stream) / T);
    slow.push_back(static_cast<double>(counter.slowest()) / steps);
    uni.push_back(static_cast<double>(counter.experts()) / steps);
    share.push_back(counter.experts() > 0 ? static_cast<double>(counter.slowest()) /
                                                static_cast<double>(counter.experts())
                                          : 0.0);
  }
  out.s_per_step = median(t);
  out.hit_rate = median(hit);
  out.bytes_read_per_token = median(read);
  out.requests_per_token = median(req);
  out.stream_requests_per_step = median(msgs);
  out.lo_tx_per_token = median(tx);
  out.lo_rx_per_token = median(rx);
  out.engine_stream_bytes_per_token = median(eng);
  out.host_stream_bytes_per_token = median(hst);
  out.slowest_host_experts_per_step = median(slow);
  out.union_experts_per_step = median(uni);
  out.slowest_host_share = median(share);
  for (size_t i = 0; i < n; ++i) {
    out.host_hit_rates.push_back(median(host_hit[i]));
    out.host_bytes_read_per_step.push_back(median(host_read[i]));
    out.host_bytes_read_per_token.push_back(median(host_read[i]) / sequences);
  }
  return out;
}

// `k3ctl place --model MODEL --drives D0,D1 --apply` (this k3ctl), its plan
// as one JSON line.
StatusOr<json> place_two(const std::string& model, const std::string& d0, const std::string& d1) {
  std::error_code ec;
  for (const std::string& d : {d0, d1}) {
    fs::create_directories(d, ec);
    if (ec) return absl::InternalError(cat(d, ": ", ec.message()));
  }
  K3_ASSIGN_OR_RETURN(base::ProcessResult r,
                      base::run_process({base::self_exe_dir() + "/k3ctl", "place", "--model", model,
                                         "--drives", cat(d0, ",", d1), "--apply"}));
  if (r.exit_code != 0)
    return absl::InternalError(cat("k3ctl place --apply failed (exit ", r.exit_code, "): ", r.err));
  json plan = json::parse(r.out, nullptr, false);
  if (plan.is_discarded()) return absl::InternalError("k3ctl place printed no JSON plan");
  return plan;
}

void run_bench_hosts(const HostsOptions& o) {
  // Before any thread exists: a namespace is per thread, later ones inherit it.
  const Status netns = enter_private_network_namespace();
  base::set_log_level("warn");

  auto source = expertd::ShardSet::open(o.model, {});
  if (!source.ok()) return fail(msg(source.status()));
  const checkpoint::ModelConfig& c = (*source)->config();
  const uint64_t eb = (*source)->index().expert_bytes();
  const int64_t L = c.num_moe_layers();
  const int64_t k = c.num_experts_per_token;
  if (L < 1 || k < 1) return fail(cat(o.model, " has no routed experts to place on hosts"));
  const uint64_t all = static_cast<uint64_t>(L * c.num_experts);
  const double expert_bytes_per_token =
      static_cast<double>(k) * static_cast<double>(L) * static_cast<double>(eb);
  std::vector<int> seq_list = o.sequences;
  std::sort(seq_list.begin(), seq_list.end());
  seq_list.erase(std::unique(seq_list.begin(), seq_list.end()), seq_list.end());
  const json seq_json = seq_list;
  // A host's cache: --cache-frac of its share of one step's experts (the
  // union over the batch), at least 2 slots, and below the share.
  auto cache_slots = [&](double step_experts, int hosts) {
    return std::max<uint64_t>(2, static_cast<uint64_t>(o.cache_frac * step_experts / hosts));
  };
  for (int n : {1, 2})
    if (static_cast<double>(cache_slots(static_cast<double>(k * L), n)) >=
        static_cast<double>(k * L) / n)
      return fail(cat("--cache-frac ", o.cache_frac, " leaves ", n, " host(s) ",
                      cache_slots(static_cast<double>(k * L), n),
                      " slots, not below the share of one step (", static_cast<double>(k * L) / n,
                      " experts): every step would not read"));

  // Two host directories, half the experts each, evenly per layer (for the
  // half layout only: replicas serve the model directory itself).
  const bool half = std::find(o.layouts.begin(), o.layouts.end(), "half") != o.layouts.end();
  std::unique_ptr<base::ScratchDir> scratch;
  std::string d0, d1;
  if (half) {
    std::string work = o.work_dir;
    if (work.empty()) {
      auto s = base::ScratchDir::create("k3bench-hosts");
      if (!s.ok()) return fail(msg(s.status()));
      scratch = std::move(*s);
      work = scratch->path();
    }
    d0 = work + "/host0";
    d1 = work + "/host1";
    auto plan = place_two(o.model, d0, d1);
    if (!plan.ok()) return fail(msg(plan.status()));
    json drive_bytes = json::array();
    if (plan->contains("drives") && (*plan)["drives"].is_array())
      for (const json& d : (*plan)["drives"])
        if (d.contains("bytes")) drive_bytes.push_back(d["bytes"]);
    emit({{"metric", "placement"},
          {"sequences", seq_json},
          {"hosts", 2},
          {"dirs", {d0, d1}},
          {"bytes_per_host", drive_bytes},
          {"written_bytes", plan->value("written_bytes", json(0))},
          {"files_already_complete", plan->value("files_already_complete", json(0))},
          {"value", plan->value("seconds", json(0.0))},
          {"unit", "s"}});
  }

  engined::EngineOptions eo;
  eo.speculation = speculation_mode(o.speculate);
  eo.sequence_groups = o.sequence_groups;
  auto model = engined::Model::load(o.model, {}, eo);
  if (!model.ok()) return fail(msg(model.status()));
  engined::Model& m = **model;

  // The compute bound per sequence count: one host, every expert the runs
  // use resident (the same runs once before, unmeasured; greedy decoding
  // repeats its experts). It also counts one step's union of experts.
  std::map<int, double> compute_bound, step_union;
  {
    std::vector<std::unique_ptr<BenchHost>> hosts;
    auto h = start_bench_host("resident", o.model, all + 2, 0, o.queue_depth);
    if (!h.ok()) return fail(msg(h.status()));
    hosts.push_back(std::move(*h));
    auto src = bench_hosts_source(hosts, m);
    if (!src.ok()) return fail(msg(src.status()));
    for (int N : seq_list) {
      if (auto w = decode_hosts(m, **src, hosts, o, N); !w.ok()) return fail(msg(w.status()));
      auto d = decode_hosts(m, **src, hosts, o, N);
      if (!d.ok()) return fail(msg(d.status()));
      if (!(d->s_per_step > 0)) return fail("the compute bound measured 0 s/step");
      compute_bound[N] = d->s_per_step;
      step_union[N] = d->union_experts_per_step;
      emit({{"metric", "compute_bound"},
            {"sequences", N},
            {"hosts", 1},
            {"value", d->s_per_step},
            {"unit", "s/step"},
            {"tokens_per_s", N / d->s_per_step},
            {"union_experts_per_step", d->union_experts_per_step},
            {"hit_rate", d->hit_rate},
            {"bytes_read_per_token", d->bytes_read_per_token}});
    }
  }

  // Each host's read cap: one host's I/O bound (one step's union over the
  // cap) at least io_factor x that count's compute bound for every count, or
  // lower while the two hosts together would take more than drive_frac of
  // the drive they share here.
  auto ceiling = ceiling_line(**source, o.queue_depth, 4u << 20, o.ceiling_seconds, true, "before",
                              {{"sequences", seq_json}});
  if (!ceiling.ok()) return fail(msg(ceiling.status()));
  const double ceiling_mbps = (*ceiling)["value"].get<double>() * 1e3;
  auto union_bytes = [&](int N) { return step_union[N] * static_cast<double>(eb); };
  double by_compute = 1e300;
  for (int N : seq_list)
    by_compute = std::min(by_compute, union_bytes(N) / (o.io_factor * compute_bound[N]) / 1e6);
  const double by_drive = o.drive_frac * ceiling_mbps / 2;
  const double rate_mbps = std::min(by_compute, by_drive);
  if (!(rate_mbps > 0) || rate_mbps > 1e6)
    return fail(
        cat("the read limit would be ", rate_mbps, " MB/s, outside expertd's (0, 1000000]"));
  auto one_host_io_bound = [&](int N) { return union_bytes(N) / (rate_mbps * 1e6); };
  json io_over_compute = json::object();
  for (int N : seq_list)
    io_over_compute[std::to_string(N)] = one_host_io_bound(N) / compute_bound[N];
  emit({{"metric", "read_limit"},
        {"sequences", seq_json},
        {"value", rate_mbps},
        {"unit", "MB/s"},
        {"set_by", by_compute <= by_drive ? "io_factor" : "drive_ceiling"},
        {"io_factor", o.io_factor},
        {"drive_frac", o.drive_frac},
        {"drive_ceiling_mbps", ceiling_mbps},
        {"one_host_io_bound_s", one_host_io_bound(seq_list[0])},
        {"io_over_compute", one_host_io_bound(seq_list[0]) / compute_bound[seq_list[0]]},
        {"io_over_compute_by_sequences", io_over_compute},
        {"compute_bound_s", compute_bound[seq_list[0]]}});
  emit({{"metric", "expert_bytes_per_token"},
        {"sequences", seq_json},
        {"value", expert_bytes_per_token},
        {"unit", "B/token"},
        {"top_k", k},
        {"moe_layers", L},
        {"expert_bytes", eb}});
  const std::string counted =
      netns.ok() ? "lo tx_bytes delta in a private network namespace (only this benchmark's "
                   "connections; each packet is counted once in tx and again in rx)"
                 : cat("lo tx_bytes delta in the shared network namespace, other local traffic "
                       "included (no private namespace: ",
                       netns.message(), ")");

  // (hosts, layout) of each figure: one host with every expert, then two in
  // each layout asked for.
  std::vector<std::pair<int, std::string>> configs = {{1, "all"}};
  for (const std::string& l : o.layouts) configs.push_back({2, l});
  for (int N : seq_list) {
    const double cb = compute_bound[N];
    std::map<std::string, HostsDecode> by_layout;
    std::map<std::string, double> layer_bound;
    for (const auto& [n, layout] : configs) {
      const uint64_t slots = cache_slots(step_union[N], n);
      const double share = step_union[N] / n;
      if (static_cast<double>(slots) >= share)
        return fail(cat(N, " sequences: --cache-frac ", o.cache_frac, " leaves ", n, " host(s) ",
                        slots, " slots, not below the share of one step (", share, " experts)"));
      std::vector<std::unique_ptr<BenchHost>> hosts;
      const bool replicas = layout == "replicas";
      const std::vector<std::string> dirs = layout == "half" ? std::vector<std::string>{d0, d1}
                                                             : std::vector<std::string>(n, o.model);
      for (int i = 0; i < n; ++i) {
        auto h = start_bench_host(cat("host", i), dirs[i], slots, rate_mbps, o.queue_depth);
        if (!h.ok()) return fail(msg(h.status()));
        hosts.push_back(std::move(*h));
      }
      auto src = bench_hosts_source(hosts, m);
      if (!src.ok()) return fail(msg(src.status()));
      auto d = decode_hosts(m, **src, hosts, o, N, replicas);
      if (!d.ok()) return fail(msg(d.status()));
      double slowest = 0;
      for (double b : d->host_bytes_read_per_step) slowest = std::max(slowest, b);
      const double io_bound = slowest / (rate_mbps * 1e6);
      // Each layer request waits for its busiest host: the bound of this layout.
      const double layer_io_bound =
          d->slowest_host_experts_per_step * static_cast<double>(eb) / (rate_mbps * 1e6);
      emit(
          {{"metric", "decode"},
           {"sequences", N},
           {"hosts", n},
           {"layout", layout},
           {"value", d->s_per_step},
           {"unit", "s/step"},
           {"s_per_token", d->s_per_step / N},
           {"tokens_per_s", N / d->s_per_step},
           {"hit_rate", d->hit_rate},
           {"host_hit_rates", d->host_hit_rates},
           {"cache_experts_per_host", slots},
           {"step_share_experts_per_host", share},
           {"o_direct", d->direct},
           {"read_limit_mbps", rate_mbps},
           {"bytes_read_per_token", d->bytes_read_per_token},
           {"host_bytes_read_per_token", d->host_bytes_read_per_token},
           {"experts_requested_per_token", d->requests_per_token},
           {"union_experts_per_step", d->union_experts_per_step},
           {"stream_requests_per_step", d->stream_requests_per_step},
           {"io_bound_s", io_bound},
           {"compute_bound_s", cb},
           {"ratio_to_io_bound", io_bound > 0 ? d->s_per_step / io_bound : 0.0},
           {"slowest_host_experts_per_step", d->slowest_host_experts_per_step},
           {"slowest_host_share", d->slowest_host_share},
           {"layer_io_bound_s", layer_io_bound},
           {"ratio_to_layer_io_bound", layer_io_bound > 0 ? d->s_per_step / layer_io_bound : 0.0}});
      by_layout[layout] = *d;
      layer_bound[layout] = layer_io_bound;
    }
    const HostsDecode& one = by_layout["all"];
    for (size_t c = 1; c < configs.size(); ++c) {
      const std::string& layout = configs[c].second;
      const HostsDecode& two = by_layout[layout];
      emit({{"metric", "hosts_speedup"},
            {"sequences", N},
            {"layout", layout},
            {"value", one.s_per_step / two.s_per_step},
            {"unit", "ratio"},
            {"of", "tokens/s of 2 hosts over 1 host"},
            {"tokens_per_s_1_host", N / one.s_per_step},
            {"tokens_per_s_2_hosts", N / two.s_per_step},
            {"s_per_step_1_host", one.s_per_step},
            {"s_per_step_2_hosts", two.s_per_step},
            {"slowest_host_share_2_hosts", two.slowest_host_share},
            {"layer_io_bound_speedup",
             layer_bound[layout] > 0 ? layer_bound["all"] / layer_bound[layout] : 0.0},
            {"target", 1.8}});
    }
    for (const auto& [n, layout] : configs) {
      const HostsDecode& d = by_layout[layout];
      // The experts the tokens used, per token: top-k x MoE layers x expert
      // size (the measure); and the union over the batch once per
      // step, over its N tokens (what the hosts had to deliver).
      const double union_per_token = d.union_experts_per_step * static_cast<double>(eb) / N;
      emit({{"metric", "network_bytes_per_token"},
            {"sequences", N},
            {"hosts", n},
            {"layout", layout},
            {"value", d.lo_tx_per_token},
            {"unit", "B/token"},
            {"counted", counted},
            {"private_netns", netns.ok()},
            {"lo_rx_bytes_per_token", d.lo_rx_per_token},
            {"engine_stream_bytes_per_token", d.engine_stream_bytes_per_token},
            {"host_stream_bytes_per_token", d.host_stream_bytes_per_token},
            {"expert_bytes_per_token", expert_bytes_per_token},
            {"union_expert_bytes_per_token", union_per_token}});
      emit({{"metric", "network_over_expert_bytes"},
            {"sequences", N},
            {"hosts", n},
            {"layout", layout},
            {"value", d.lo_tx_per_token / expert_bytes_per_token},
            {"unit", "ratio"},
            {"of", "link bytes per token over top-k x MoE layers x expert size"},
            {"over_union_expert_bytes",
             union_per_token > 0 ? d.lo_tx_per_token / union_per_token : 0.0},
            {"target", 0.01}});
    }
  }
}

void add_bench_hosts(CLI::App& app) {
  auto o = std::make_shared<HostsOptions>();
  auto* cmd = bench_command(app)->add_subcommand(
      "hosts", "decode s/token with the experts on 1 and 2 read-limited remote expertd hosts");
  cmd->add_option("--model", o->model, "model directory (a k3-slice checkpoint)")->required();
  cmd->add_option("--work-dir", o->work_dir,
                  "where the two hosts' directories are placed and kept (resumed when rerun; "
                  "default: a temporary directory, removed)");
  cmd->add_option("--tokens", o->tokens, "decode steps per run")->check(CLI::Range(1, 100000));
  cmd->add_option("--prompt-tokens", o->prompt_tokens,
                  "prompt tokens before each run's timed decode steps")
      ->check(CLI::Range(1, 3));
  cmd->add_option("--runs", o->runs, "runs per figure (the median is printed)")
      ->check(CLI::Range(1, 100));
  cmd->add_option("--io-factor", o->io_factor,
                  "one host's I/O bound over the compute bound (sets the read limit)")
      ->check(CLI::Range(2.0, 1000.0));
  cmd->add_option("--cache-frac", o->cache_frac,
                  "a host's cache over its share of one step's experts (below 1)")
      ->check(CLI::Range(0.01, 0.99));
  cmd->add_option("--drive-frac", o->drive_frac,
                  "the share of the drive's ceiling the hosts' read limits may take together")
      ->check(CLI::Range(0.01, 1.0));
  cmd->add_option("--ceiling-seconds", o->ceiling_seconds,
                  "seconds of the drive-ceiling measurement")
      ->check(CLI::Range(0.1, 600.0));
  cmd->add_option("--queue-depth", o->queue_depth, "each host's io_uring depth")
      ->check(CLI::Range(1, 4096));
  cmd->add_option("--speculate", o->speculate, "engine --speculate: auto, on, off")
      ->check(CLI::IsMember({"auto", "on", "off"}));
  cmd->add_option("--sequences", o->sequences,
                  "sequences decoded together, one figure set each (repeatable or a list; "
                  "default: 1 and 4)")
      ->delimiter(',')
      ->check(CLI::Range(1, 64));
  cmd->add_option("--sequence-groups", o->sequence_groups,
                  "engined --sequence-groups: 2 splits two or more sequences into two groups "
                  "offset by half a layer, 1 runs them as one")
      ->check(CLI::Range(1, 2));
  cmd->add_option("--layouts", o->layouts,
                  "two-host layouts to measure (a list): half (each host holds half of every "
                  "layer's experts, placed by k3ctl place) and replicas (each holds every "
                  "expert, the placement splits each step's experts between them); default half")
      ->delimiter(',')
      ->check(CLI::IsMember({"half", "replicas"}));
  cmd->callback([o] { run_bench_hosts(*o); });
}

const CommandRegistrar kBenchHosts(add_bench_hosts);

}  // namespace
}  // namespace k3::tools
