// The fields chat and completion requests share (all but max_tokens): the
// model, sampling (OpenAI's, vLLM's top_k, min_p, repetition_penalty, and
// k3_expert_top_p), stop strings, n, stream and stream_options. Each refusal
// names the field.
//
// Thread-safe (no shared state).
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "gateway/core/api_types.h"
#include "gateway/http/field_reader.h"
#include "shared/api/request_limits.h"
#include "shared/status.h"

namespace k3::gateway {

// The fields chat and completions share, all but max_tokens.
struct CommonFields {
  std::string model;
  SamplingOptions sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  int n = 1;
};

StatusOr<CommonFields> parse_common(const FieldReader& f);

// Parses the fields chat and completion requests share into `call` (a
// ChatCall or a CompletionCall).
template <typename Call>
Status parse_common_into(const FieldReader& f, Call& call) {
  K3_ASSIGN_OR_RETURN(CommonFields common, parse_common(f));
  call.model = std::move(common.model);
  call.sampling = common.sampling;
  call.stop = std::move(common.stop);
  call.stream = common.stream;
  call.include_usage = common.include_usage;
  call.n = common.n;
  return absl::OkStatus();
}

}  // namespace k3::gateway
