#include "gateway/core/gateway_metrics.h"

namespace k3::gateway {

GatewayMetrics::GatewayMetrics(MetricRegistry& r, std::string model_name)
    : registry(r),
      requests(r.counter_family("k3_requests_total", "Requests finished, by API and HTTP status",
                                {"api", "code"})),
      prompt_tokens(r.counter("k3_prompt_tokens_total", "Prompt tokens of admitted requests")),
      cached_tokens(r.counter("k3_cached_prompt_tokens_total",
                              "Prompt tokens not computed again (usage's cached_tokens): "
                              "continued from an engined session or restored")),
      restored_tokens(r.counter("k3_restored_prompt_tokens_total",
                                "Of the cached prompt tokens, those restored from a saved state "
                                "(turn checkpoint or prefix snapshot)")),
      generated_tokens(r.counter("k3_generated_tokens_total", "Tokens generated")),
      cancelled(r.counter("k3_requests_cancelled_total",
                          "Requests whose client went away before the end")),
      rejected(r.counter("k3_requests_rejected_total",
                         "Requests refused with 429 because the admission queue was full")),
      refused(r.counter_family("k3_requests_refused_total",
                               "Requests refused for a per-request limit: --max-prompt-tokens "
                               "(413), --max-tokens-limit (400)",
                               {"limit"})),
      time_to_first_token(
          r.histogram("k3_time_to_first_token_seconds", "Admission to first generated token",
                      {0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120,
                       // a long prompt at the real model's speed
                       600, 1800, 3600, 14400})),
      decode_per_token(r.histogram(
          "k3_decode_seconds_per_token", "Decode time per generated token, per request",
          {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30})),
      queue_wait(r.histogram("k3_queue_wait_seconds", "Time requests waited for admission",
                             {0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60})),
      model(std::move(model_name)),
      request_seconds(r.histogram_family(
          "k3_request_duration_seconds",
          "End-to-end request latency, queue and generation, by route and model (every outcome)",
          {"api", "model"},
          // At ~5 s per token on the real model a long answer takes hours.
          {0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200, 14400})),
      prompt_length(r.histogram_family(
          "k3_request_prompt_tokens", "Prompt length of answered requests, by route and model",
          {"api", "model"}, {16, 64, 256, 1024, 4096, 16384, 65536, 262144, 1048576})),
      completion_length(r.histogram_family(
          "k3_request_completion_tokens",
          "Completion length of answered requests (all choices), by route and model",
          {"api", "model"}, {1, 4, 16, 64, 256, 1024, 4096, 16384, 65536})) {}

void GatewayMetrics::request_done(const char* api, int code, double seconds) {
  requests.with({api, std::to_string(code)}).inc();
  request_seconds.with({api, model}).observe(seconds);
}

void GatewayMetrics::request_lengths(const char* api, int64_t prompt_tokens,
                                     int64_t completion_tokens) {
  prompt_length.with({api, model}).observe(static_cast<double>(prompt_tokens));
  completion_length.with({api, model}).observe(static_cast<double>(completion_tokens));
}

}  // namespace k3::gateway
