// The gateway's Prometheus metrics (GET /metrics): requests by API and
// outcome, queue, tokens, time to first token, decode time per token; the
// engine's and expertd's figures are callback gauges filled at scrape time.
#pragma once

#include "gateway/core/metric_registry.h"

namespace k3::gateway {

// Thread-safe (the metric types are).
struct GatewayMetrics {
  explicit GatewayMetrics(MetricRegistry& registry);

  // One finished request: `api` chat|completion, `code` the HTTP-style status.
  void request_done(const char* api, int code) { requests.with({api, std::to_string(code)}).inc(); }

  MetricRegistry& registry;
  CounterFamily& requests;         // k3_requests_total{api,code}
  Counter& prompt_tokens;          // k3_prompt_tokens_total
  Counter& cached_tokens;          // k3_cached_prompt_tokens_total (usage's cached_tokens)
  Counter& restored_tokens;        // k3_restored_prompt_tokens_total (of them, restored)
  Counter& generated_tokens;       // k3_generated_tokens_total
  Counter& cancelled;              // k3_requests_cancelled_total
  Counter& rejected;               // k3_requests_rejected_total (429: queue full)
  CounterFamily& refused;          // k3_requests_refused_total{limit}: prompt_tokens, max_tokens
  Histogram& time_to_first_token;  // k3_time_to_first_token_seconds
  Histogram& decode_per_token;     // k3_decode_seconds_per_token
  Histogram& queue_wait;           // k3_queue_wait_seconds
};

}  // namespace k3::gateway
