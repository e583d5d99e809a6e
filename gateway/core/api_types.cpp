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

Status check_client_sampling(const SamplingOptions& s) {
  // The client's fields on the wire, the ones it left unset at values every
  // range takes (they resolve to the model's defaults later).
  k3serve::v1::SamplingParams p;
  p.set_temperature(s.temperature.value_or(1.0f));
  p.set_top_p(s.top_p.value_or(1.0f));
  p.set_top_k(s.top_k.value_or(0));
  p.set_min_p(s.min_p.value_or(0.0f));
  p.set_presence_penalty(s.presence_penalty.value_or(0.0f));
  p.set_frequency_penalty(s.frequency_penalty.value_or(0.0f));
  p.set_repetition_penalty(s.repetition_penalty.value_or(1.0f));
  for (const auto& [id, bias] : s.logit_bias) (*p.mutable_logit_bias())[id] = bias;
  K3_RETURN_IF_ERROR(api::validate_sampling(p, /*vocab=*/0));
  if (s.expert_top_p && !(*s.expert_top_p > 0.0f && *s.expert_top_p <= 1.0f)) {
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
