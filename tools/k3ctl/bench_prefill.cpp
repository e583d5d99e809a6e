// k3ctl bench prefill: the prefill chunk policy's curve (issue 11 item 4).
// Per chunk size, through expertd (O_DIRECT where the filesystem allows, a
// cache of a quarter of the experts, cold per chunk), JSON lines:
//   prefill   tok/s of a --prompt-tokens prompt run alone, and its expert
//             bytes per prompt token (a chunk reads each distinct expert
//             once);
//             with the p50/p99 step time of a decoding session running
//             beside the same prompt in the engine loop (a chunk stalls the
//             other sessions' steps while it runs).
// Then `prefill_chunk_choice`: the chunk with the best tok/s among those
// whose concurrent p99 step stays within --step-budget x the smallest
// chunk's p99 (the README states the default taken from it).
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <nlohmann/json.hpp>
#include <sstream>

#include "engined/experts/source_factory.h"
#include "engined/model/model.h"
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

struct Point {
  int64_t chunk = 0;
  double tok_s = 0, bytes_per_token = 0, p50 = 0, p99 = 0;
  size_t steps = 0;
};

// Decode steps of session A while the prompt prefills beside it in the loop.
StatusOr<std::vector<double>> concurrent_steps(engined::EngineLoop& loop,
                                               const std::vector<int32_t>& prompt) {
  engined::ServeRequest a;
  a.request_id = "bench-decode";
  a.prompt = {1, 2, 3};
  a.max_tokens = 1 << 20;  // cancelled below
  K3_ASSIGN_OR_RETURN(auto ha, loop.submit(std::move(a)));
  // A is decoding once two tokens came.
  int seen = 0;
  engined::ServeEvent e;
  while (seen < 2) {
    if (!ha->next(&e, 600000)) return absl::DeadlineExceededError("the decoding session stalled");
    if (e.kind == engined::ServeEvent::Kind::kFailed) return e.status;
    if (e.kind == engined::ServeEvent::Kind::kToken) ++seen;
  }
  engined::ServeRequest b;
  b.request_id = "bench-prefill";
  b.prompt = prompt;
  b.max_tokens = 1;
  K3_ASSIGN_OR_RETURN(auto hb, loop.submit(std::move(b)));
  std::vector<double> gaps;
  Clock::time_point last = Clock::now();
  bool b_done = false;
  while (!b_done) {
    while (ha->next(&e, 1)) {
      if (e.kind == engined::ServeEvent::Kind::kFailed) return e.status;
      if (e.kind == engined::ServeEvent::Kind::kToken) {
        const auto now = Clock::now();
        gaps.push_back(secs(last, now));
        last = now;
      }
    }
    while (hb->next(&e, 0)) {
      if (e.kind == engined::ServeEvent::Kind::kFailed) return e.status;
      if (e.kind == engined::ServeEvent::Kind::kFinished) b_done = true;
    }
  }
  // B's last chunk ran in a step whose token of A may come after B's end
  // (one step holds the whole prompt when the chunk covers it): A's next
  // token is counted too (when that step's was already seen, a step after
  // B's, which moves no quantile up).
  for (;;) {
    if (!ha->next(&e, 600000)) return absl::DeadlineExceededError("the decoding session stalled");
    if (e.kind == engined::ServeEvent::Kind::kFailed) return e.status;
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
  return gaps;
}

StatusOr<Point> measure(const expertd::ShardSet& shards, const PrefillOptions& o, int64_t chunk) {
  const checkpoint::ModelConfig& c = shards.config();
  const uint64_t all = static_cast<uint64_t>(c.num_moe_layers() * c.num_experts);
  expertd::SegmentServerOptions so;
  so.segment = cat("k3bench-prefill-", chunk, "-", ::getpid());
  so.cache_bytes =
      std::max<uint64_t>(2, all / 4) * shm::expert_slot_stride(shards.index().expert_bytes());
  so.queue_depth = o.queue_depth;
  K3_ASSIGN_OR_RETURN(auto server, expertd::SegmentServer::start(shards, so));
  engined::EngineOptions eo;
  eo.chunk = chunk;
  K3_ASSIGN_OR_RETURN(auto model, engined::Model::load(o.model, {}, eo));
  engined::ExpertSourceOptions xo;
  xo.expertd_segments = {so.segment};
  Point p;
  p.chunk = chunk;
  const std::vector<int32_t> prompt = make_prompt(o.prompt_tokens, c.vocab_size, 0);
  {
    K3_ASSIGN_OR_RETURN(auto src, engined::make_expert_source(xo, *model));
    auto seq = model->new_sequence();
    std::vector<float> logits;
    const auto t0 = Clock::now();
    K3_RETURN_IF_ERROR(model->forward(*src, *seq, prompt, 1, &logits));
    const double el = secs(t0, Clock::now());
    const ExpertSourceStats st = src->stats();
    p.tok_s = o.prompt_tokens / std::max(el, 1e-9);
    p.bytes_per_token = (static_cast<double>(st.bytes_read) +
                         static_cast<double>(st.speculative_hits) *
                             static_cast<double>(shards.index().expert_bytes())) /
                        o.prompt_tokens;
  }
  engined::EngineLoopOptions lo;
  lo.sessions = 2;
  lo.experts = xo;
  K3_ASSIGN_OR_RETURN(auto loop, engined::EngineLoop::create(std::move(model), lo));
  // Another prompt, so the loop's session cannot reuse anything.
  K3_ASSIGN_OR_RETURN(std::vector<double> gaps,
                      concurrent_steps(*loop, make_prompt(o.prompt_tokens, c.vocab_size, 1)));
  loop.reset();
  server->stop();
  p.p50 = quantile(gaps, 0.5);
  p.p99 = quantile(gaps, 0.99);
  p.steps = gaps.size();
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
}

void add_bench_prefill(CLI::App& app) {
  auto o = std::make_shared<PrefillOptions>();
  auto* cmd = bench_command(app)->add_subcommand(
      "prefill", "prefill tok/s, expert bytes per token and a decoding session's p99 vs chunk");
  cmd->add_option("--model", o->model, "model directory (a k3-slice checkpoint)")->required();
  cmd->add_option("--prompt-tokens", o->prompt_tokens, "prompt length")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--chunks", o->chunks, "chunk sizes, comma-separated (default 8,...,256)");
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
