// The gateway's per-route families: end-to-end latency for every outcome,
// prompt and completion lengths for answered requests, labelled by route
// (api) and model; the existing families keep their labels.
#include "gateway/core/gateway_metrics.h"

#include <gtest/gtest.h>

#include "tests/test_util.h"

namespace k3::gateway {
namespace {

TEST(GatewayMetrics, LatencyAndLengthsPerRouteAndModel) {
  MetricRegistry registry;
  GatewayMetrics m(registry, "kimi-k3");
  m.request_done("chat", 200, 7.5);
  m.request_lengths("chat", 300, 20);
  m.request_done("chat", 429, 0.01);
  m.request_done("completion", 200, 0.3);
  m.request_lengths("completion", 5, 2);
  const std::string text = registry.render();
  EXPECT_CONTAINS(text, "# TYPE k3_request_duration_seconds histogram\n");
  EXPECT_CONTAINS(
      text, "k3_request_duration_seconds_bucket{api=\"chat\",model=\"kimi-k3\",le=\"5\"} 1\n");
  EXPECT_CONTAINS(
      text, "k3_request_duration_seconds_bucket{api=\"chat\",model=\"kimi-k3\",le=\"10\"} 2\n");
  EXPECT_CONTAINS(text, "k3_request_duration_seconds_count{api=\"chat\",model=\"kimi-k3\"} 2\n");
  EXPECT_CONTAINS(text,
                  "k3_request_duration_seconds_sum{api=\"completion\",model=\"kimi-k3\"} 0.3\n");
  // Only answered requests have lengths.
  EXPECT_CONTAINS(text,
                  "k3_request_prompt_tokens_bucket{api=\"chat\",model=\"kimi-k3\",le=\"256\"} 0\n");
  EXPECT_CONTAINS(
      text, "k3_request_prompt_tokens_bucket{api=\"chat\",model=\"kimi-k3\",le=\"1024\"} 1\n");
  EXPECT_CONTAINS(text, "k3_request_prompt_tokens_count{api=\"chat\",model=\"kimi-k3\"} 1\n");
  EXPECT_CONTAINS(text, "k3_request_completion_tokens_sum{api=\"chat\",model=\"kimi-k3\"} 20\n");
  EXPECT_CONTAINS(
      text,
      "k3_request_completion_tokens_bucket{api=\"completion\",model=\"kimi-k3\",le=\"4\"} 1\n");
  // The existing counter is unchanged: no model label.
  EXPECT_CONTAINS(text, "k3_requests_total{api=\"chat\",code=\"429\"} 1\n");
}

}  // namespace
}  // namespace k3::gateway
