// k3ctl bench serve: load on a running gateway (gRPC Complete, raw token-id
// prompts so nothing depends on the tokenizer): one client alone first, then
// N concurrent clients, in the same run. JSON lines: time to first token,
// decode s/token, tokens/s, requests answered, refused (429) and failed.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <mutex>
#include <thread>

#include <nlohmann/json.hpp>

#include "tools/k3ctl/commands.h"
#include "tools/k3ctl/gateway_client.h"
#include "tools/k3ctl/gateway_probe.h"

namespace k3::tools {
namespace {

using Clock = std::chrono::steady_clock;
double secs(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void emit(nlohmann::json j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

struct ServeOptions {
  GatewayOptions gateway;
  int clients = 8;
  int requests = 2;  // per client
  int prompt_tokens = 64;
  int max_tokens = 32;
};

struct Sample {
  bool ok = false, refused = false;
  double ttft = 0, decode_per_token = 0;
  int tokens = 0;
};

// One request; the prompt differs per (client, request) so no session or
// checkpoint covers it.
Sample one_request(const ServeOptions& o, int client, int request) {
  auto stub = connect_gateway(o.gateway);
  k3serve::v1::CompleteRequest req;
  for (int i = 0; i < o.prompt_tokens; ++i)
    req.add_prompt_ids(10 + (client * 7919 + request * 104729 + i * 31) % 990);
  req.set_max_tokens(static_cast<uint32_t>(o.max_tokens));
  req.mutable_sampling()->set_temperature(0);
  grpc::ClientContext ctx;
  prepare_context(o.gateway, &ctx);
  const auto t0 = Clock::now();
  auto reader = stub->Complete(&ctx, req);
  k3serve::v1::CompleteEvent e;
  Sample s;
  Clock::time_point first{}, last{};
  while (reader->Read(&e)) {
    if (e.has_done()) {
      s.tokens = static_cast<int>(e.done().usage().completion_tokens());
      continue;
    }
    if (e.has_progress()) continue;  // queued / prompt read so far: no text yet
    if (first == Clock::time_point{}) first = Clock::now();
    last = Clock::now();
  }
  const grpc::Status st = reader->Finish();
  s.ok = st.ok();
  s.refused = st.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED;
  if (s.ok && first != Clock::time_point{}) {
    s.ttft = secs(t0, first);
    if (s.tokens > 1) s.decode_per_token = secs(first, last) / (s.tokens - 1);
  }
  return s;
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * static_cast<double>(v.size() - 1) + 0.5)];
}

void report(const std::string& phase, int clients, const std::vector<Sample>& samples,
            double wall) {
  std::vector<double> ttft, dpt;
  int ok = 0, refused = 0, failed = 0;
  long tokens = 0;
  for (const auto& s : samples) {
    if (s.ok) {
      ++ok;
      tokens += s.tokens;
      ttft.push_back(s.ttft);
      if (s.decode_per_token > 0) dpt.push_back(s.decode_per_token);
    } else if (s.refused) {
      ++refused;
    } else {
      ++failed;
    }
  }
  double mean_dpt = 0;
  for (double d : dpt) mean_dpt += d / static_cast<double>(dpt.size());
  const nlohmann::json base = {{"phase", phase}, {"clients", clients}};
  auto with = [&](nlohmann::json j) {
    j.update(base);
    return j;
  };
  emit(with({{"metric", "serve_requests"},
             {"value", ok},
             {"refused_429", refused},
             {"failed", failed},
             {"unit", "requests"}}));
  emit(with({{"metric", "serve_ttft_p50"}, {"value", percentile(ttft, 0.5)}, {"unit", "s"}}));
  emit(with({{"metric", "serve_ttft_p99"}, {"value", percentile(ttft, 0.99)}, {"unit", "s"}}));
  emit(with({{"metric", "serve_decode_s_per_token"}, {"value", mean_dpt}, {"unit", "s/token"}}));
  emit(with({{"metric", "serve_tokens_per_s"},
             {"value", wall > 0 ? static_cast<double>(tokens) / wall : 0},
             {"unit", "tokens/s"}}));
}

void run_bench(const ServeOptions& o) {
  // A wrong address fails here, explained (an HTTP port, nothing listening,
  // TLS), not as a run of failed requests.
  StatusOr<k3serve::v1::ListModelsResponse> models = check_gateway(
      *connect_gateway(o.gateway), o.gateway, o.gateway.timeout_s > 0 ? o.gateway.timeout_s : 10.0);
  if (!models.ok()) return fail(std::string(msg(models.status())));
  // Alone: the per-request figures without contention.
  std::vector<Sample> alone;
  auto t0 = Clock::now();
  for (int r = 0; r < o.requests; ++r) alone.push_back(one_request(o, 1000, r));
  report("single", 1, alone, secs(t0, Clock::now()));

  std::vector<Sample> all;
  std::mutex mu;
  std::vector<std::thread> threads;
  t0 = Clock::now();
  for (int c = 0; c < o.clients; ++c)
    threads.emplace_back([&, c] {
      for (int r = 0; r < o.requests; ++r) {
        Sample s = one_request(o, c, r);
        std::lock_guard<std::mutex> lk(mu);
        all.push_back(s);
      }
    });
  for (auto& t : threads) t.join();
  report("concurrent", o.clients, all, secs(t0, Clock::now()));
  for (const auto& s : all)
    if (!s.ok && !s.refused) {
      fail("some requests failed (not 429): see serve_requests.failed");
      break;
    }
}

void add_bench_serve(CLI::App& app) {
  auto opt = std::make_shared<ServeOptions>();
  auto* cmd = bench_command(app)->add_subcommand(
      "serve", "load a running gateway: one client, then N concurrent (gRPC Complete)");
  add_gateway_flags(cmd, opt->gateway);
  cmd->add_option("--clients", opt->clients, "concurrent clients")->check(CLI::Range(1, 1024));
  cmd->add_option("--requests", opt->requests, "requests per client")->check(CLI::Range(1, 100000));
  cmd->add_option("--prompt-tokens", opt->prompt_tokens, "prompt length (token ids)")
      ->check(CLI::Range(1, 1 << 20));
  cmd->add_option("--max-tokens", opt->max_tokens, "tokens to generate per request")
      ->check(CLI::Range(1, 1 << 20));
  cmd->callback([opt] { run_bench(*opt); });
}

const CommandRegistrar kBenchServe(add_bench_serve);

}  // namespace
}  // namespace k3::tools
