// The gateway's Prometheus metrics (GET /metrics): requests by API and
// outcome, queue, tokens, time to first token, decode time per token, and per
// route (api) and model the end-to-end latency and the prompt and completion
// lengths; the engine's and expertd's figures are callback gauges filled at
// scrape time.
#pragma once

#include <cstdint>
#include <string>

#include "gateway/core/metric_registry.h"

namespace k3::gateway {

// Thread-safe (the metric types are).
struct GatewayMetrics {
  // `model`: the served model's name, the `model` label of the per-route
  // families (the existing families keep their labels: their series and
  // every query on them stay as they were).
  GatewayMetrics(MetricRegistry& registry, std::string model);

  // One finished request: `api` the route (chat|completion|...), `code` the
  // HTTP-style status, `seconds` from the core taking it to its end (queue
  // and generation).
  void request_done(const char* api, int code, double seconds);
  // The lengths of an answered request, in tokens.
  void request_lengths(const char* api, int64_t prompt_tokens, int64_t completion_tokens);

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
  const std::string model;
  HistogramFamily& request_seconds;    // k3_request_duration_seconds{api,model}
  HistogramFamily& prompt_length;      // k3_request_prompt_tokens{api,model}
  HistogramFamily& completion_length;  // k3_request_completion_tokens{api,model}
};

}  // namespace k3::gateway
