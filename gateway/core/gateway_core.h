// The gateway's parts wired together: tokenizer, engined client, admission
// queue, generation core, topology, API keys and metrics. The HTTP and gRPC
// adapters both hold one of these; main() builds it.
#pragma once

#include <memory>
#include <string>

#include "gateway/api_keys.h"
#include "gateway/core/admission.h"
#include "gateway/core/config.h"
#include "gateway/core/engine_client.h"
#include "gateway/core/gateway_metrics.h"
#include "gateway/core/generator.h"
#include "gateway/core/topology.h"
#include "gateway/metrics.h"

namespace k3::gateway {

struct HealthReport {
  bool ok = false;
  nlohmann::json detail;  // engined and each expertd
};

// Thread-safe after create().
class GatewayCore {
 public:
  static StatusOr<std::unique_ptr<GatewayCore>> create(const GatewayConfig& config);

  const GatewayConfig& config() const { return config_; }
  Generator& generator() { return *generator_; }
  AdmissionQueue& admission() { return *admission_; }
  const ApiKeys& api_keys() const { return keys_; }
  Metrics& metrics() { return registry_; }
  GatewayMetrics& gateway_metrics() { return *metrics_; }
  Topology& topology() { return *topology_; }
  HealthReport health() const;
  int64_t created() const { return created_; }
  // A request's deadline from now.
  std::chrono::steady_clock::time_point deadline() const;

 private:
  explicit GatewayCore(const GatewayConfig& c) : config_(c) {}
  void register_callbacks();

  GatewayConfig config_;
  ApiKeys keys_;
  Metrics registry_;
  std::unique_ptr<GatewayMetrics> metrics_;
  std::unique_ptr<EngineClient> engine_;
  std::unique_ptr<AdmissionQueue> admission_;
  std::unique_ptr<Generator> generator_;
  std::unique_ptr<Topology> topology_;
  int64_t created_ = 0;
};

}  // namespace k3::gateway
