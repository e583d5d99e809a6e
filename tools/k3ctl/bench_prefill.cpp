// k3ctl bench prefill: the prefill chunk policy's curve (issue 11 item 4)
// and the default chunk policy against it (issue 26 item 3). Every figure
// comes from the engine loop (default options but two sessions and the
// expertd segment) through a fresh expertd per measurement (O_DIRECT where
// the filesystem allows, a cache of a quarter of the experts, cold), JSON
// lines:
//   prefill   per --chunks size (the loop's chunk policy off, the model's
//             chunk set to it): tok/s of a --prompt-tokens prompt run
//             alone (submit to the end of its one decoded token), its
//             expert bytes per prompt token (a chunk reads each distinct
//             expert once); a decoding session's median step alone before
//             a second prompt arrives (decode_step_alone_s) and its
//             p50/p99 step beside that prompt (a chunk stalls the other
//             sessions' steps while it runs).
//   prefill_chunk_choice   the chunk with the best tok/s among those whose
//             concurrent p99 step stays within --step-budget x the smallest
//             chunk's p99 (the README states the default taken from it).
//   prefill_policy   printed whatever --chunks says: the same figures with
//             the default chunk policy (EngineLoopOptions::chunk_policy,
//             the model's default chunk), plus concurrent_p99_over_alone
//             and gemm_share: the prompt-alone run's seconds inside matrix
//             products (the dense ones, engined::matmul_seconds(), and the
//             routed experts', the expert source's compute_seconds) over
//             its wall time.
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engined/model/model.h"
#include "engined/model/parallel.h"
#include "engined/serving/engine_loop.h"
#include "expertd/segment_server.h"
#include "expertd/shard_set.h"
#include "shared/base/log.h"
#include "shared/shm/read_span.h"
#include "tools/k3ctl/commands.h"

namespace k3::tools {

using k3::experts::ExpertSourceStats;

namespace {

using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void emit(const nlohmann::json& j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

struct PrefillOptions {
  std::string model;
  int prompt_tokens = 256;
  std::string chunks = "8,16,32,64,128,256";
  double step_budget = 3.0;
  int queue_depth = 16;
};

StatusOr<std::vector<int64_t>> parse_chunks(const std::string& text) {
  std::vector<int64_t> out;
  std::stringstream ss(text);
  std::string item;
  while (std::getline(ss, item, ',')) {
    char* end = nullptr;
    const long v = std::strtol(item.c_str(), &end, 10);
    if (item.empty() || *end != '\0' || v < 1 || v > 4096)
      return absl::InvalidArgumentError(
          cat("--chunks: '", item, "' is not a chunk size in [1, 4096]"));
    out.push_back(v);
  }
  if (out.empty()) return absl::InvalidArgumentError("--chunks: no chunk size");
  return out;
}

double quantile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * static_cast<double>(v.size())));
  return v[i];
}

std::vector<int32_t> make_prompt(int n, int64_t vocab, int salt) {
  std::vector<int32_t> ids;
  for (int i = 0; i < n; ++i)
    ids.push_back(static_cast<int32_t>((i * 7919 + 13 + salt * 104729) % vocab));
  return ids;
}

// One measurement: a chunk's (chunk > 0: the engine loop with the chunk
// policy off and the model's chunk set to it) or the default chunk policy's
// (chunk == 0).
struct Point {
  int64_t chunk = 0;
  // The prompt alone: tok/s, expert bytes per prompt token, and the share
  // of its wall time spent in matrix products.
  double tok_s = 0, bytes_per_token = 0, gemm_share = 0;
  // The decoding session: its median step before the prompt arrives, and
  // its p50/p99 step beside the prompt.
  double alone = 0, p50 = 0, p99 = 0;
  size_t steps = 0;
};

// Steps of the decoding session timed alone before the prompt arrives (its
// median is decode_step_alone_s).
constexpr int kAloneSteps = 8;

Status failed(const engined::ServeEvent& e) {
  return e.status.ok() ? absl::InternalError("a request failed without a status") : e.status;
}

// Runs `prompt` alone in `loop` (a fresh one: nothing else is running) with
// max_tokens = 1, timed from submit to kFinished. The one decoded token is
// left in: one decode step is negligible beside a whole prompt's prefill.
// Fills p's tok_s, bytes_per_token and gemm_share.
Status prompt_alone(engined::EngineLoop& loop, const std::vector<int32_t>& prompt,
                    uint64_t expert_bytes, Point* p) {
  engined::ServeRequest r;
  r.request_id = "bench-prefill-alone";
  r.prompt = prompt;
  r.max_tokens = 1;
  const ExpertSourceStats x0 = loop.counters().experts;
  const double mm0 = engined::matmul_seconds();
  const auto t0 = Clock::now();
  K3_ASSIGN_OR_RETURN(auto h, loop.submit(std::move(r)));
  engined::ServeEvent e;
  for (;;) {
    if (!h->next(&e, 600000)) return absl::DeadlineExceededError("the prompt stalled");
    if (e.kind == engined::ServeEvent::Kind::kFailed) return failed(e);
    if (e.kind == engined::ServeEvent::Kind::kFinished) break;
  }
  const double el = std::max(secs(t0, Clock::now()), 1e-9);
  // The loop copies its expert source's counters before kFinished goes out.
  const ExpertSourceStats x = loop.counters().experts - x0;
  const double n = static_cast<double>(prompt.size());
  p->tok_s = n / el;
  // A speculative hit is an expert read ahead for this prompt: its bytes
  // were read too.
  p->bytes_per_token =
      (static_cast<double>(x.bytes_read) +
       static_cast<double>(x.speculative_hits) * static_cast<double>(expert_bytes)) /
      n;
  // Matrix products: the dense ones (engined::matmul_seconds(), process-wide;
  // nothing else computes in this process meanwhile) and the routed experts'
  // (the expert source's compute_seconds: MXFP4 rows on the prompt's tokens).
  p->gemm_share = (engined::matmul_seconds() - mm0 + x.compute_seconds) / el;
  return absl::OkStatus();
}

// The decoding session A's step times: `alone` before the prompt is
// submitted, `beside` while it prefills beside A in the loop.
struct DecodeSteps {
  std::vector<double> alone, beside;
};

StatusOr<DecodeSteps> concurrent_steps(engined::EngineLoop& loop,
                                       const std::vector<int32_t>& prompt) {
  engined::ServeRequest a;
  a.request_id = "bench-decode";
  a.prompt = {1, 2, 3};
  a.max_tokens = 1 << 20;  // cancelled below
  K3_ASSIGN_OR_RETURN(auto ha, loop.submit(std::move(a)));
  DecodeSteps d;
  // A is decoding once two tokens came (the first ends its prefill); then
  // its steps alone are the gaps between its next tokens.
  int seen = 0;
  Clock::time_point last;
  engined::ServeEvent e;
  while (seen < 2 + kAloneSteps) {
    if (!ha->next(&e, 600000)) return absl::DeadlineExceededError("the decoding session stalled");
    if (e.kind == engined::ServeEvent::Kind::kFailed) return failed(e);
    if (e.kind != engined::ServeEvent::Kind::kToken) continue;
    const auto now = Clock::now();
    if (++seen > 2) d.alone.push_back(secs(last, now));
    last = now;
  }
  engined::ServeRequest b;
  b.request_id = "bench-prefill";
  b.prompt = prompt;
  b.max_tokens = 1;
  K3_ASSIGN_OR_RETURN(auto hb, loop.submit(std::move(b)));
  std::vector<double>& gaps = d.beside;
  last = Clock::now();
  bool b_done = false;
  while (!b_done) {
    while (ha->next(&e, 1)) {
      if (e.kind == engined::ServeEvent::Kind::kFailed) return failed(e);
      if (e.kind == engined::ServeEvent::Kind::kToken) {
        const auto now = Clock::now();
        gaps.push_back(secs(last, now));
        last = now;
      }
    }
    while (hb->next(&e, 0)) {
      if (e.kind == engined::ServeEvent::Kind::kFailed) return failed(e);
      if (e.kind == engined::ServeEvent::Kind::kFinished) b_done = true;
    }
  }
  // B's last chunk ran in a step whose token of A may come after B's end
  // (one step holds the whole prompt when the chunk covers it): A's next
  // token is counted too (when that step's was already seen, a step after
  // B's, which moves no quantile up).
  for (;;) {
    if (!ha->next(&e, 600000)) return absl::DeadlineExceededError("the decoding session stalled");
    if (e.kind == engined::ServeEvent::Kind::kFailed) return failed(e);
    if (e.kind == engined::ServeEvent::Kind::kToken) {
      const auto now = Clock::now();
      gaps.push_back(secs(last, now));
      break;
    }
  }
  ha->cancel();
  for (;;) {
    if (!ha->next(&e, 600000)) return absl::DeadlineExceededError("cancel did not end the session");
    if (e.kind == engined::ServeEvent::Kind::kFailed ||
        e.kind == engined::ServeEvent::Kind::kFinished)
      break;
  }
  // The first gap straddles B's submission: keep it (B's first chunk may
  // land in it).
  return d;
}

// One cold measurement: a fresh expertd (a quarter of the experts cached,
// O_DIRECT where the filesystem allows) and a fresh engine loop (default
// options but two sessions and the expertd segment). The prompt runs alone
// first (the cache cold), then another prompt beside the decoding session.
StatusOr<Point> measure(const expertd::ShardSet& shards, const PrefillOptions& o, int64_t chunk) {
  const checkpoint::ModelConfig& c = shards.config();
  const uint64_t all = static_cast<uint64_t>(c.num_moe_layers() * c.num_experts);
  const uint64_t expert_bytes = shards.index().expert_bytes();
  expertd::SegmentServerOptions so;
  so.segment = chunk > 0 ? cat("k3bench-prefill-", chunk, "-", ::getpid())
                         : cat("k3bench-prefill-policy-", ::getpid());
  so.cache_bytes = std::max<uint64_t>(2, all / 4) * shm::expert_slot_stride(expert_bytes);
  so.queue_depth = o.queue_depth;
  K3_ASSIGN_OR_RETURN(auto server, expertd::SegmentServer::start(shards, so));
  engined::EngineOptions eo;
  if (chunk > 0) eo.chunk = chunk;
  K3_ASSIGN_OR_RETURN(auto model, engined::Model::load(o.model, {}, eo));
  engined::EngineLoopOptions lo;
  lo.sessions = 2;
  lo.experts.expertd_segments = {so.segment};
  // A chunk line measures its fixed chunk; the policy line the default.
  lo.chunk_policy = chunk == 0;
  K3_ASSIGN_OR_RETURN(auto loop, engined::EngineLoop::create(std::move(model), lo));
  Point p;
  p.chunk = chunk;
  K3_RETURN_IF_ERROR(
      prompt_alone(*loop, make_prompt(o.prompt_tokens, c.vocab_size, 0), expert_bytes, &p));
  // Another prompt, so the loop's session cannot reuse anything.
  K3_ASSIGN_OR_RETURN(DecodeSteps d,
                      concurrent_steps(*loop, make_prompt(o.prompt_tokens, c.vocab_size, 1)));
  loop.reset();
  server->stop();
  p.alone = quantile(d.alone, 0.5);
  p.p50 = quantile(d.beside, 0.5);
  p.p99 = quantile(d.beside, 0.99);
  p.steps = d.beside.size();
  return p;
}

void run_bench_prefill(const PrefillOptions& o) {
  base::set_log_level("warn");
  auto chunks = parse_chunks(o.chunks);
  if (!chunks.ok()) return fail(msg(chunks.status()));
  auto shards = expertd::ShardSet::open(o.model, {});
  if (!shards.ok()) return fail(msg(shards.status()));
  std::vector<Point> pts;
  for (int64_t chunk : *chunks) {
    auto p = measure(**shards, o, chunk);
    if (!p.ok()) return fail(msg(p.status()));
    emit({{"metric", "prefill"},
          {"chunk", chunk},
          {"prompt_tokens", o.prompt_tokens},
          {"value", p->tok_s},
          {"unit", "tok/s"},
          {"expert_bytes_per_prompt_token", p->bytes_per_token},
          {"decode_step_alone_s", p->alone},
          {"concurrent_decode_step_p50_s", p->p50},
          {"concurrent_decode_step_p99_s", p->p99},
          {"concurrent_decode_steps", p->steps}});
    pts.push_back(*p);
  }
  const auto smallest =
      std::min_element(pts.begin(), pts.end(), [](auto& a, auto& b) { return a.chunk < b.chunk; });
  const double budget = smallest->p99 * o.step_budget;
  const Point* best = &*smallest;
  for (const Point& p : pts)
    if (p.p99 <= budget && p.tok_s > best->tok_s) best = &p;
  emit({{"metric", "prefill_chunk_choice"},
        {"value", best->chunk},
        {"unit", "tokens"},
        {"tok_s", best->tok_s},
        {"p99_budget_s", budget},
        {"rule", "best tok/s with concurrent decode p99 <= step_budget x the smallest chunk's"}});
  auto policy = measure(**shards, o, /*chunk=*/0);
  if (!policy.ok()) return fail(msg(policy.status()));
  emit({{"metric", "prefill_policy"},
        {"prompt_tokens", o.prompt_tokens},
        {"value", policy->tok_s},
        {"unit", "tok/s"},
        {"expert_bytes_per_prompt_token", policy->bytes_per_token},
        {"gemm_share", policy->gemm_share},
        {"decode_step_alone_s", policy->alone},
        {"concurrent_decode_step_p50_s", policy->p50},
        {"concurrent_decode_step_p99_s", policy->p99},
        {"concurrent_p99_over_alone", policy->p99 / std::max(policy->alone, 1e-12)},
        {"concurrent_decode_steps", policy->steps}});
}

void add_bench_prefill(CLI::App& app) {
  auto o = std::make_shared<PrefillOptions>();
  auto* cmd = bench_command(app)->add_subcommand(
      "prefill",
      "prefill tok/s, expert bytes per token and a decoding session's p99: per fixed chunk, "
      "then the default chunk policy");
  cmd->add_option("--model", o->model, "model directory (a k3-slice checkpoint)")->required();
  cmd->add_option("--prompt-tokens", o->prompt_tokens, "prompt length")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--chunks", o->chunks,
                  "fixed chunk sizes, comma-separated (default 8,...,256); the "
                  "default policy's line comes after them");
  cmd->add_option("--step-budget", o->step_budget,
                  "allowed concurrent decode p99 as a multiple of the smallest chunk's")
      ->check(CLI::Range(1.0, 1000.0));
  cmd->add_option("--queue-depth", o->queue_depth, "expertd's io_uring depth")
      ->check(CLI::Range(1, 4096));
  cmd->callback([o] { run_bench_prefill(*o); });
}

const CommandRegistrar kBenchPrefill(add_bench_prefill);

}  // namespace
}  // namespace k3::tools
