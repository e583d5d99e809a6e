#include "gateway/http/sse.h"

#include <cmath>

#include "gateway/core/json_text.h"

namespace k3::gateway {

using nlohmann::json;

std::string sse_event(const json& j) {
  return cat("data: ", dump_body(j), "\n\n");
}

std::string sse_done() {
  return "data: [DONE]\n\n";
}

std::string sse_progress_comment(const ProgressNote& note) {
  switch (note.phase) {
    case ProgressNote::Phase::kQueued:
      return cat(": queued ", note.queued, "\n\n");
    case ProgressNote::Phase::kPrefill: {
      std::string eta;
      // Whole seconds, rounded up (0 only when nothing is left); a figure
      // past a century is not an estimate.
      if (note.eta_s >= 0 && note.eta_s < 3.2e9)
        eta = cat(" eta_s=", static_cast<int64_t>(std::ceil(note.eta_s)));
      return cat(": prefill ", note.done, "/", note.total, eta, "\n\n");
    }
    case ProgressNote::Phase::kKeepAlive:
      return ": keep-alive\n\n";
    case ProgressNote::Phase::kAdmitted:
      break;
  }
  return "";
}

}  // namespace k3::gateway
