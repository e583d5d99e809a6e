#include "gateway/core/api_types.h"

namespace k3::gateway {

const char* finish_reason_name(FinishReason r) {
  switch (r) {
    case FinishReason::kStop:
      return "stop";
    case FinishReason::kLength:
      return "length";
    case FinishReason::kToolCalls:
      return "tool_calls";
  }
  return "stop";
}

Status validate_sampling(const SamplingOptions& sampling) {
  // Written as !(in range) so that NaN fails too.
  if (!(sampling.temperature >= 0.0f && sampling.temperature <= 2.0f)) {
    return absl::InvalidArgumentError("'temperature' must be between 0 and 2");
  }
  if (!(sampling.top_p > 0.0f && sampling.top_p <= 1.0f)) {
    return absl::InvalidArgumentError("'top_p' must be greater than 0 and at most 1");
  }
  if (sampling.expert_top_p && !(*sampling.expert_top_p > 0.0f && *sampling.expert_top_p <= 1.0f)) {
    return absl::InvalidArgumentError("'k3_expert_top_p' must be greater than 0 and at most 1");
  }
  return absl::OkStatus();
}

Status validate_stop(const std::vector<std::string>& stop) {
  // OpenAI's limit; the stop matcher holds back this many strings' worth of text.
  constexpr size_t kMaxStop = 4;
  if (stop.size() > kMaxStop) {
    return absl::InvalidArgumentError(cat("'stop' takes at most ", kMaxStop, " strings"));
  }
  for (const std::string& s : stop) {
    if (s.empty()) return absl::InvalidArgumentError("'stop' strings must not be empty");
  }
  return absl::OkStatus();
}

}  // namespace k3::gateway
