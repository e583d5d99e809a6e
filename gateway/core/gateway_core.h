// The gateway's parts wired together: tokenizer, engined client, admission
// queue, generation core, topology, API keys and metrics, and serve(): the
// one entry point both API adapters (gateway/http, gateway/grpc) run
// generation calls through. main() builds it.
#pragma once

#include <memory>
#include <string>

#include "gateway/core/admission.h"
#include "gateway/core/api_keys.h"
#include "gateway/core/config.h"
#include "gateway/core/engine_client.h"
#include "gateway/core/gateway_metrics.h"
#include "gateway/core/generator.h"
#include "gateway/core/metric_registry.h"
#include "gateway/core/topology.h"

namespace k3::gateway {

// ok: engined answers and some expert source does (HTTP 200). detail:
// engined, each expertd and remote host, and "status": "ok", "degraded"
// (serving, but an expertd or remote host is down: "degraded" names them and
// the layers no healthy expertd serves) or "unavailable" (503).
struct HealthReport {
  bool ok = false;
  nlohmann::json detail;
};

// Thread-safe after create().
class GatewayCore {
 public:
  static StatusOr<std::unique_ptr<GatewayCore>> create(const GatewayConfig& config);

  const GatewayConfig& config() const { return config_; }
  Generator& generator() { return *generator_; }
  AdmissionQueue& admission() { return *admission_; }
  const ApiKeys& api_keys() const { return keys_; }
  MetricRegistry& metrics() { return registry_; }
  GatewayMetrics& gateway_metrics() { return *metrics_; }
  Topology& topology() { return *topology_; }
  HealthReport health() const;
  int64_t created() const { return created_; }
  // A request's deadline: --request-timeout-s from now (time_point::max()
  // when it is 0: none), or the client's own deadline when that is sooner.
  std::chrono::steady_clock::time_point deadline(
      std::chrono::system_clock::time_point client_deadline =
          std::chrono::system_clock::time_point::max()) const;

  // The one way a generation call runs, for both APIs: `prep` is the
  // adapter's parsed and prepared request (or why it is refused); the call
  // gets its deadline (the sooner of rc.deadline, when set, and deadline()),
  // waits for admission, runs, and is counted in k3_requests_total{api,code}
  // (499 when the client went away). `on_delta` as Generator::run. With
  // rc.on_progress, the request is told its place while it waits (kQueued),
  // then once that it was admitted (kAdmitted), then what Generator::run
  // sends.
  StatusOr<GenerationResult> serve(const char* api, const StatusOr<PreparedRequest>& prep,
                                   RequestContext& rc,
                                   const std::function<bool(const OutputDelta&)>& on_delta);

 private:
  explicit GatewayCore(const GatewayConfig& c) : config_(c) {}
  void register_callbacks();
  void register_remote_host_callbacks();  // k3_remote_expertd_*{host}

  GatewayConfig config_;
  ApiKeys keys_;
  MetricRegistry registry_;
  std::unique_ptr<GatewayMetrics> metrics_;
  std::unique_ptr<EngineClient> engine_;
  std::unique_ptr<AdmissionQueue> admission_;
  std::unique_ptr<Generator> generator_;
  std::unique_ptr<Topology> topology_;
  int64_t created_ = 0;
};

}  // namespace k3::gateway
