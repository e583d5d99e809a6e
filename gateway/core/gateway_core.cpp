#include "gateway/core/gateway_core.h"

#include <ctime>
#include <set>

#include "gateway/core/build_info_metric.h"
#include "gateway/core/served_model.h"
#include "gateway/core/status_codes.h"
#include "shared/base/file.h"
#include "shared/base/log.h"
#include "shared/checkpoint/stop_tokens.h"

namespace k3::gateway {

namespace v1 = k3serve::v1;

StatusOr<std::unique_ptr<GatewayCore>> GatewayCore::create(const GatewayConfig& config) {
  auto core = std::unique_ptr<GatewayCore>(new GatewayCore(config));
  core->created_ = static_cast<int64_t>(std::time(nullptr));
  if (!config.api_keys_file.empty()) K3_RETURN_IF_ERROR(core->keys_.add_file(config.api_keys_file));
  TopologyFile topology;
  if (!config.topology_file.empty()) {
    K3_ASSIGN_OR_RETURN(std::string text, base::read_small_file(config.topology_file));
    K3_ASSIGN_OR_RETURN(topology, parse_topology(text, config.topology_file));
  }
  K3_ASSIGN_OR_RETURN(auto tok, tokenizer::Tokenizer::load(config.model_dir));
  core->metrics_ = std::make_unique<GatewayMetrics>(core->registry_, config.model_name);
  core->engine_ = std::make_unique<EngineClient>(config.engined);
  // Slots start at 1 and follow engined's session count once it answers.
  core->admission_ = std::make_unique<AdmissionQueue>(1, config.max_queue);
  GeneratorOptions go;
  go.model_name = config.model_name;
  for (const std::string& name : config.served_model_names)
    if (name != config.model_name) go.model_aliases.push_back(name);
  // The context: engined's --max-context, never beyond the model's own limit.
  K3_ASSIGN_OR_RETURN(const ModelIdentity identity, read_model_identity(config.model_dir));
  go.max_prompt_tokens = config.max_prompt_tokens;
  K3_ASSIGN_OR_RETURN(go.sampling, load_generation_config(config.model_dir));
  go.max_tokens_limit = config.max_tokens_limit;
  K3_ASSIGN_OR_RETURN(go.stops, checkpoint::load_stop_tokens(config.model_dir, &tok));
  go.progress_timeout_s = config.progress_timeout_s;
  go.progress_interval_s = config.progress_interval_s;
  core->generator_ = std::make_unique<Generator>(std::move(tok), core->engine_.get(),
                                                 core->admission_.get(), core->metrics_.get(), go);
  GatewayCore* raw = core.get();
  core->topology_ = std::make_unique<Topology>(
      std::move(topology), core->engine_.get(), config.poll_seconds,
      [raw, identity](const v1::EngineDescribeResponse& d) {
        raw->admission_->set_slots(static_cast<int>(std::max<uint32_t>(1, d.sessions())));
        raw->generator_->set_max_context(
            effective_context(static_cast<int64_t>(d.max_context()), identity.context_limit));
      });
  core->register_callbacks();
  return core;
}

std::chrono::steady_clock::time_point GatewayCore::deadline(
    std::chrono::system_clock::time_point client_deadline) const {
  const auto now = std::chrono::steady_clock::now();
  // 0: no cap of the gateway's own.
  auto d = config_.request_timeout_s > 0
               ? now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                           std::chrono::duration<double>(config_.request_timeout_s))
               : std::chrono::steady_clock::time_point::max();
  if (client_deadline < std::chrono::system_clock::time_point::max()) {
    const auto left = client_deadline - std::chrono::system_clock::now();
    d = std::min(d, now + std::chrono::duration_cast<std::chrono::steady_clock::duration>(left));
  }
  return d;
}

StatusOr<GenerationResult> GatewayCore::serve(
    const char* api, const StatusOr<PreparedRequest>& prep, RequestContext& rc,
    const std::function<bool(const OutputDelta&)>& on_delta) {
  const auto t_start = std::chrono::steady_clock::now();
  auto done = [&](StatusOr<GenerationResult> r) {
    int code = r.ok() ? 200 : http_status(r.status());
    if (!r.ok() && code != 504 && rc.alive && !rc.alive()) code = 499;
    metrics_->request_done(
        api, code,
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t_start).count());
    if (r.ok()) metrics_->request_lengths(api, r->usage.prompt_tokens, r->usage.completion_tokens);
    if (code == 429) metrics_->rejected.inc();
    return r;
  };
  if (!prep.ok()) return done(prep.status());
  const auto own = deadline();
  rc.deadline =
      rc.deadline == std::chrono::steady_clock::time_point{} ? own : std::min(rc.deadline, own);
  const auto t_queue = std::chrono::steady_clock::now();
  // A stream hears of its place in line when it starts waiting, when the
  // place changes, and at least every progress interval.
  std::function<bool(int)> waiting;
  if (rc.on_progress) {
    waiting = [&rc, last_place = 0, last_note = t_queue,
               interval =
                   std::chrono::duration<double>(config_.progress_interval_s)](int place) mutable {
      const auto now = std::chrono::steady_clock::now();
      if (place == last_place && now - last_note < interval) return true;
      last_place = place;
      last_note = now;
      ProgressNote n;
      n.phase = ProgressNote::Phase::kQueued;
      n.queued = place;
      return rc.on_progress(n);
    };
  }
  // One engined session per choice.
  auto ticket = admission_->enter(rc.deadline, rc.alive, prep->n, waiting);
  metrics_->queue_wait.observe(
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t_queue).count());
  if (!ticket.ok()) {
    base::logger("gateway")->info("[{}] refused: {}", rc.id, msg(ticket.status()));
    return done(ticket.status());
  }
  if (rc.on_progress && !rc.on_progress(ProgressNote{ProgressNote::Phase::kAdmitted}))
    return done(absl::CancelledError("client went away"));
  auto result = generator_->run(*prep, std::move(*ticket), rc, on_delta);
  // Past the deadline whatever ended it (a watchdog cancelling the call too).
  if (!result.ok() && std::chrono::steady_clock::now() >= rc.deadline)
    return done(
        absl::DeadlineExceededError(cat("request deadline passed: ", msg(result.status()))));
  return done(std::move(result));
}

HealthReport GatewayCore::health() const {
  HealthReport r;
  const bool engine = topology_->engine_up();
  r.detail["engined"] = engine ? "up" : topology_->engine_error();
  bool any_expertd = false;
  nlohmann::json ex = nlohmann::json::array();
  // What the placement lacks: components down, and the layers that only
  // they serve (known from when they answered Describe).
  nlohmann::json down = nlohmann::json::array();
  std::set<uint32_t> known_layers, served_layers;
  for (const auto& s : topology_->snapshot()) {
    any_expertd = any_expertd || s.healthy;
    known_layers.insert(s.layers.begin(), s.layers.end());
    if (s.healthy)
      served_layers.insert(s.layers.begin(), s.layers.end());
    else
      down.push_back(cat("expertd ", s.entry.name, " (", s.entry.address, ")"));
    ex.push_back({{"name", s.entry.name},
                  {"address", s.entry.address},
                  {"healthy", s.healthy},
                  {"segment", s.segment},
                  {"layers", s.layers},
                  {"error", s.error}});
  }
  r.detail["expertd"] = ex;
  // The storage hosts engined takes experts from, as engined sees them.
  if (auto st = topology_->engine_stats(); st && st->remote_hosts_size() > 0) {
    nlohmann::json rh = nlohmann::json::array();
    for (const auto& h : st->remote_hosts()) {
      rh.push_back(
          {{"name", h.name()}, {"address", h.address()}, {"up", h.up()}, {"error", h.error()}});
      if (!h.up()) down.push_back(cat("remote expertd ", h.name(), " (", h.address(), ")"));
    }
    r.detail["remote_expertd"] = rh;
  }
  r.ok = engine && (ex.empty() || any_expertd);
  // Serving, but not everything the placement counts on answers: still 200
  // (requests may succeed on replicas), and it says what is missing.
  const bool degraded = r.ok && !down.empty();
  r.detail["status"] = !r.ok ? "unavailable" : degraded ? "degraded" : "ok";
  if (degraded) {
    nlohmann::json unserved = nlohmann::json::array();
    for (uint32_t l : known_layers)
      if (!served_layers.count(l)) unserved.push_back(l);
    r.detail["degraded"] = {{"down", down}, {"layers_unserved", unserved}};
  }
  return r;
}

void GatewayCore::register_callbacks() {
  registry_.callback_gauge("k3_queue_depth", "Requests waiting for admission",
                           [this] { return std::optional<double>(admission_->waiting()); });
  registry_.callback_gauge("k3_requests_running", "Requests holding an engined session",
                           [this] { return std::optional<double>(admission_->running()); });
  registry_.callback_gauge("k3_engine_sessions", "engined's decode sessions",
                           [this] { return std::optional<double>(admission_->slots()); });
  // engined's limits that evict rather than refuse (docs/limits.md).
  auto engine_figure = [this](uint64_t (v1::EngineStatsResponse::*field)()
                                  const) -> std::optional<double> {
    auto st = topology_->engine_stats();
    if (!st) return std::nullopt;
    return static_cast<double>(((*st).*field)());
  };
  registry_.callback_counter(
      "k3_session_evictions_total",
      "engined sessions whose kept conversation was dropped for another (--sessions)", {},
      [engine_figure] {
        return std::vector<CallbackSample>{
            {{}, engine_figure(&v1::EngineStatsResponse::session_evictions)}};
      });
  registry_.callback_gauge(
      "k3_checkpoint_bytes", "Bytes of saved turn checkpoints held",
      [engine_figure] { return engine_figure(&v1::EngineStatsResponse::checkpoint_bytes); });
  registry_.callback_gauge(
      "k3_checkpoint_budget_bytes", "engined's turn-checkpoint budget (--checkpoint-mb)",
      [engine_figure] { return engine_figure(&v1::EngineStatsResponse::checkpoint_budget_bytes); });
  registry_.callback_counter(
      "k3_checkpoint_evictions_total",
      "Turn checkpoints evicted (least recently used first) for the budget or the disk", {},
      [engine_figure] {
        return std::vector<CallbackSample>{
            {{}, engine_figure(&v1::EngineStatsResponse::checkpoint_evictions)}};
      });
  registry_.callback_counter(
      "k3_checkpoint_failed_saves_total", "Turn checkpoints that could not be saved", {},
      [engine_figure] {
        return std::vector<CallbackSample>{
            {{}, engine_figure(&v1::EngineStatsResponse::checkpoint_failed_saves)}};
      });
  registry_.callback_counter("k3_snapshots_saved_total",
                             "Prefill snapshots saved (engined --snapshot-tokens)", {},
                             [engine_figure] {
                               return std::vector<CallbackSample>{
                                   {{}, engine_figure(&v1::EngineStatsResponse::snapshots_saved)}};
                             });
  registry_.callback_gauge(
      "k3_checkpoint_disk_bytes", "Bytes of checkpoint files in engined's --checkpoint-dir",
      [engine_figure] { return engine_figure(&v1::EngineStatsResponse::checkpoint_disk_bytes); });
  registry_.callback_counter(
      "k3_snapshot_writes_dropped_total",
      "Checkpoint files not written because the disk write queue was full (a slow disk)", {},
      [engine_figure] {
        return std::vector<CallbackSample>{
            {{}, engine_figure(&v1::EngineStatsResponse::snapshot_writes_dropped)}};
      });
  registry_.callback_gauge("k3_up", "Components answering their health check", {"component"},
                           [this] {
                             std::vector<CallbackSample> out;
                             out.push_back({{"engined"}, topology_->engine_up() ? 1.0 : 0.0});
                             for (const auto& s : topology_->snapshot())
                               out.push_back({{"expertd/" + s.entry.name}, s.healthy ? 1.0 : 0.0});
                             return out;
                           });
  register_remote_host_callbacks();
  register_build_info(registry_, *topology_);
  // Routed-expert figures: from the expertd instances when there are any
  // (their caches are the ones that matter), else engined's in-process cache.
  auto expert = [this](int what) -> std::optional<double> {
    const auto states = topology_->snapshot();
    double req = 0, hits = 0, gbps = 0, bytes = 0;
    if (!states.empty()) {
      for (const auto& s : states) {
        if (!s.healthy) continue;
        req += static_cast<double>(s.stats.requests());
        hits += static_cast<double>(s.stats.hits());
        gbps += s.stats.read_gbps();
        bytes += static_cast<double>(s.stats.bytes_read());
      }
    } else {
      auto st = topology_->engine_stats();
      if (!st) return std::nullopt;
      req = static_cast<double>(st->expert_requests());
      hits = static_cast<double>(st->expert_hits());
      bytes = static_cast<double>(st->expert_bytes_read());
      // engined's in-process reader does not time its reads: no figure.
      if (what == 1) return std::nullopt;
    }
    if (what == 0) return req > 0 ? hits / req : 0.0;
    if (what == 1) return gbps;
    return bytes;
  };
  registry_.callback_gauge("k3_expert_hit_ratio", "Routed-expert requests served from cache",
                           [expert] { return expert(0); });
  registry_.callback_gauge("k3_expert_read_gbps",
                           "Expert read throughput while reads were in flight (GB/s)",
                           [expert] { return expert(1); });
  registry_.callback_counter("k3_expert_bytes_read_total", "Expert bytes read from storage", {},
                             [expert] {
                               return std::vector<CallbackSample>{{{}, expert(2)}};
                             });
  // Per expertd (one per drive): its drive's read rate and its cache, as of
  // the last poll; a down expertd has no sample.
  auto per_expertd = [this](double (*value)(const v1::StatsResponse&)) {
    return [this, value] {
      std::vector<CallbackSample> out;
      for (const auto& s : topology_->snapshot())
        if (s.healthy) out.push_back({{s.entry.name}, value(s.stats)});
      return out;
    };
  };
  registry_.callback_gauge("k3_expertd_read_gbps",
                           "An expertd's expert read throughput while reads were in flight (GB/s)",
                           {"expertd"},
                           per_expertd([](const v1::StatsResponse& st) { return st.read_gbps(); }));
  registry_.callback_gauge(
      "k3_expertd_hit_ratio", "An expertd's routed-expert requests served from its cache",
      {"expertd"}, per_expertd([](const v1::StatsResponse& st) {
        return st.requests() > 0
                   ? static_cast<double>(st.hits()) / static_cast<double>(st.requests())
                   : 0.0;
      }));
  registry_.callback_counter("k3_expertd_bytes_read_total",
                             "Expert bytes an expertd read from its drive", {"expertd"},
                             per_expertd([](const v1::StatsResponse& st) {
                               return static_cast<double>(st.bytes_read());
                             }));
  registry_.callback_counter(
      "k3_expert_integrity_errors_total",
      "Expert reads refused by expertd (or by engined's in-process reader, expertd=\"engined\"): "
      "NaN (0xFF) MXFP4 scales, or a --manifest mismatch",
      {"expertd", "kind"}, [this] {
        std::vector<CallbackSample> out;
        if (auto st = topology_->engine_stats();
            st && (st->expert_corrupt() > 0 || st->expert_manifest_mismatches() > 0 ||
                   topology_->snapshot().empty())) {
          out.push_back({{"engined", "nan_scales"}, static_cast<double>(st->expert_corrupt())});
          out.push_back({{"engined", "manifest_mismatch"},
                         static_cast<double>(st->expert_manifest_mismatches())});
        }
        for (const auto& s : topology_->snapshot()) {
          out.push_back(
              {{s.entry.name, "nan_scales"}, static_cast<double>(s.stats.corrupt_experts())});
          out.push_back({{s.entry.name, "manifest_mismatch"},
                         static_cast<double>(s.stats.manifest_mismatches())});
        }
        return out;
      });
  // engined's speculative lookahead and expert top-p (issue 11).
  registry_.callback_gauge("k3_expert_speculation_on",
                           "Whether engined posts speculative reads of the next layer's experts",
                           [this]() -> std::optional<double> {
                             auto st = topology_->engine_stats();
                             if (!st) return std::nullopt;
                             return st->speculation_on() ? 1.0 : 0.0;
                           });
  registry_.callback_gauge(
      "k3_expert_speculation_recall",
      "Share of a MoE layer's experts its lookahead predicted, per lookahead input", {"input"},
      [this] {
        std::vector<CallbackSample> out;
        auto st = topology_->engine_stats();
        if (!st) return out;
        out.push_back({{"moe_input"}, st->speculation_recall_moe_input()});
        out.push_back({{"layer_output"}, st->speculation_recall_layer_output()});
        return out;
      });
  registry_.callback_counter(
      "k3_expert_speculative_bytes_total",
      "Expert bytes read speculatively; of them, hidden (used by a demand request) and wasted",
      {"kind"}, [this] {
        std::vector<CallbackSample> out;
        auto st = topology_->engine_stats();
        if (!st) return out;
        const double read = static_cast<double>(st->speculative_bytes());
        const double hidden =
            static_cast<double>(st->speculative_hits()) * static_cast<double>(st->expert_bytes());
        out.push_back({{"read"}, read});
        out.push_back({{"hidden"}, hidden});
        out.push_back({{"wasted"}, std::max(0.0, read - hidden)});
        return out;
      });
  registry_.callback_counter("k3_experts_pruned_total",
                             "(token, expert) pairs dropped by expert top-p", {}, [this] {
                               std::vector<CallbackSample> out;
                               auto st = topology_->engine_stats();
                               if (st)
                                 out.push_back({{}, static_cast<double>(st->experts_pruned())});
                               return out;
                             });
  registry_.callback_counter(
      "k3_expert_read_io_errors_total",
      "Expert read chunks that failed with an I/O error or came back short", {"expertd"}, [this] {
        std::vector<CallbackSample> out;
        for (const auto& s : topology_->snapshot())
          out.push_back({{s.entry.name}, static_cast<double>(s.stats.read_io_errors())});
        return out;
      });
  registry_.callback_counter(
      "k3_engine_tokens_total", "engined's token counters", {"kind"}, [this] {
        std::vector<CallbackSample> out;
        auto st = engine_->stats(1000);
        if (!st.ok()) return out;
        out.push_back({{"prompt"}, static_cast<double>(st->prompt_tokens())});
        out.push_back({{"prefilled"}, static_cast<double>(st->prefill_tokens())});
        out.push_back({{"reused"}, static_cast<double>(st->reused_tokens())});
        out.push_back({{"restored"}, static_cast<double>(st->restored_tokens())});
        out.push_back({{"generated"}, static_cast<double>(st->generated_tokens())});
        return out;
      });
}

void GatewayCore::register_remote_host_callbacks() {
  // Per remote expertd (storage host), from engined's Stats as of the last
  // poll: engined is the one talking to the hosts.
  using Host = v1::EngineStatsResponse::RemoteHost;
  auto per_host = [this](double (*value)(const Host&)) {
    return [this, value] {
      std::vector<CallbackSample> out;
      if (auto st = topology_->engine_stats())
        for (const Host& h : st->remote_hosts()) out.push_back({{h.name()}, value(h)});
      return out;
    };
  };
  registry_.callback_gauge(
      "k3_remote_expertd_up",
      "Remote expertd engined takes experts from: 1 connected and serving this model, 0 down",
      {"host"}, per_host([](const Host& h) { return h.up() ? 1.0 : 0.0; }));
  registry_.callback_counter(
      "k3_remote_expertd_expert_requests_total", "Routed experts engined asked of the host",
      {"host"}, per_host([](const Host& h) { return static_cast<double>(h.expert_requests()); }));
  registry_.callback_counter(
      "k3_remote_expertd_steps_total",
      "MoE layer steps engined sent the host (one stream message each)", {"host"},
      per_host([](const Host& h) { return static_cast<double>(h.steps()); }));
  registry_.callback_counter(
      "k3_remote_expertd_bytes_sent_total",
      "Bytes engined sent the host (messages plus gRPC framing)", {"host"},
      per_host([](const Host& h) { return static_cast<double>(h.bytes_sent()); }));
  registry_.callback_counter(
      "k3_remote_expertd_bytes_received_total",
      "Bytes engined received from the host (messages plus gRPC framing)", {"host"},
      per_host([](const Host& h) { return static_cast<double>(h.bytes_received()); }));
  registry_.callback_counter(
      "k3_remote_expertd_failures_total",
      "Times the host's stream failed (dead, hung, link down, refused)", {"host"},
      per_host([](const Host& h) { return static_cast<double>(h.failures()); }));
  registry_.callback_histogram(
      "k3_remote_expertd_step_seconds",
      "Round trip of a MoE layer step to the host, request sent to last reply", {"host"}, [this] {
        std::vector<CallbackHistogramSample> out;
        auto st = topology_->engine_stats();
        if (!st) return out;
        for (const Host& h : st->remote_hosts()) {
          CallbackHistogramSample s;
          s.label_values = {h.name()};
          s.snapshot.bounds.assign(h.latency_bounds().begin(), h.latency_bounds().end());
          s.snapshot.cumulative.assign(h.latency_buckets().begin(), h.latency_buckets().end());
          s.snapshot.cumulative.push_back(h.latency_count());
          s.snapshot.sum = h.latency_sum();
          s.snapshot.count = h.latency_count();
          out.push_back(std::move(s));
        }
        return out;
      });
}

}  // namespace k3::gateway
