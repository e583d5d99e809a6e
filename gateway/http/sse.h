// Server-sent events framing for streamed responses (OpenAI's "data: "
// lines, ended by "data: [DONE]"), and the comment lines that carry a
// request's progress between them (docs/openai-api.md, "Streams").
//
// Thread-safe (no shared state).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "gateway/core/api_types.h"

namespace k3::gateway {

// "data: " + dump_body(j) + "\n\n" (dump_body: gateway/core/json_text.h).
std::string sse_event(const nlohmann::json& j);
// "data: [DONE]\n\n".
std::string sse_done();

// A note as the stream's comment line, followed by an empty line:
//   ": queued N\n\n", ": prefill DONE/TOTAL eta_s=S\n\n" (S whole seconds
//   rounded up; " eta_s=S" left out while the estimate is unknown) or
//   ": keep-alive\n\n"; "" for kAdmitted (nothing to say).
std::string sse_progress_comment(const ProgressNote& note);

}  // namespace k3::gateway
