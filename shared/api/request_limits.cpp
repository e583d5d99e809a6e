#include "shared/api/request_limits.h"

#include <map>

namespace k3::api {
namespace {

// Written as !(in range) so that NaN fails too.
Status check_range(float v, const char* field, float lo, float hi, bool lo_open = false) {
  const bool ok = (lo_open ? v > lo : v >= lo) && v <= hi;
  if (ok) return absl::OkStatus();
  return absl::InvalidArgumentError(cat("'", field, "' must be ", lo_open ? "greater than " : "",
                                        lo_open ? "" : "between ", lo,
                                        lo_open ? " and at most " : " and ", hi));
}

}  // namespace

Status validate_sampling(const k3serve::v1::SamplingParams& p, int64_t vocab) {
  K3_RETURN_IF_ERROR(check_range(p.temperature(), "temperature", 0.0f, 2.0f));
  K3_RETURN_IF_ERROR(check_range(p.top_p(), "top_p", 0.0f, 1.0f, /*lo_open=*/true));
  if (p.top_k() < -1)
    return absl::InvalidArgumentError("'top_k' must be -1 (no limit), 0 (no limit) or more");
  K3_RETURN_IF_ERROR(check_range(p.min_p(), "min_p", 0.0f, 1.0f));
  K3_RETURN_IF_ERROR(check_range(p.presence_penalty(), "presence_penalty", -2.0f, 2.0f));
  K3_RETURN_IF_ERROR(check_range(p.frequency_penalty(), "frequency_penalty", -2.0f, 2.0f));
  K3_RETURN_IF_ERROR(
      check_range(p.repetition_penalty(), "repetition_penalty", 0.0f, 10.0f, /*lo_open=*/true));
  // In id order (protobuf's map has none), so a request with several bad
  // entries is always told about the same one.
  const std::map<int32_t, float> bias_by_id(p.logit_bias().begin(), p.logit_bias().end());
  int64_t banned = 0;
  for (const auto& [id, bias] : bias_by_id) {
    if (id < 0)
      return absl::InvalidArgumentError(cat("'logit_bias' names token ", id, ", a negative id"));
    if (vocab > 0 && id >= vocab)
      return absl::InvalidArgumentError(
          cat("'logit_bias' names token ", id, ", outside the vocabulary [0, ", vocab, ")"));
    if (!(bias >= -100.0f && bias <= 100.0f))
      return absl::InvalidArgumentError(
          cat("'logit_bias' of token ", id, " must be between -100 and 100"));
    banned += bias <= -100.0f;
  }
  // Ids are distinct and in [0, vocab): as many bans as ids is all of them,
  // and nothing would be left to sample.
  if (vocab > 0 && banned >= vocab)
    return absl::InvalidArgumentError(
        cat("'logit_bias' bans every token of the vocabulary (-100 on all ", vocab,
            "): nothing is left to generate"));
  return absl::OkStatus();
}

}  // namespace k3::api
