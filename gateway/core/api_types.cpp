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

namespace {

// Written as !(in range) so that NaN fails too.
Status check_range(const std::optional<float>& v, const char* field, float lo, float hi,
                   bool lo_open = false) {
  if (!v.has_value()) return absl::OkStatus();
  const bool ok = (lo_open ? *v > lo : *v >= lo) && *v <= hi;
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(cat("'", field, "' must be ", lo_open ? "greater than " : "",
                                        lo_open ? "" : "between ", lo,
                                        lo_open ? " and at most " : " and ", hi));
}

}  // namespace

Status validate_sampling(const SamplingOptions& s) {
  K3_RETURN_IF_ERROR(check_range(s.temperature, "temperature", 0.0f, 2.0f));
  K3_RETURN_IF_ERROR(check_range(s.top_p, "top_p", 0.0f, 1.0f, /*lo_open=*/true));
  if (s.top_k.has_value() && *s.top_k < -1)
    return absl::InvalidArgumentError("'top_k' must be -1 (no limit), 0 (no limit) or more");
  K3_RETURN_IF_ERROR(check_range(s.min_p, "min_p", 0.0f, 1.0f));
  K3_RETURN_IF_ERROR(check_range(s.presence_penalty, "presence_penalty", -2.0f, 2.0f));
  K3_RETURN_IF_ERROR(check_range(s.frequency_penalty, "frequency_penalty", -2.0f, 2.0f));
  K3_RETURN_IF_ERROR(
      check_range(s.repetition_penalty, "repetition_penalty", 0.0f, 10.0f, /*lo_open=*/true));
  for (const auto& [id, bias] : s.logit_bias) {
    if (id < 0)
      return absl::InvalidArgumentError(cat("'logit_bias' names token ", id, ", a negative id"));
    if (!(bias >= -100.0f && bias <= 100.0f))
      return absl::InvalidArgumentError(
          cat("'logit_bias' of token ", id, " must be between -100 and 100"));
  }
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
