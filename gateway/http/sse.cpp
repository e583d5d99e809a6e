#include "gateway/http/sse.h"

#include "gateway/core/json_text.h"

namespace k3::gateway {

using nlohmann::json;

std::string sse_event(const json& j) {
  return cat("data: ", dump_body(j), "\n\n");
}

std::string sse_done() {
  return "data: [DONE]\n\n";
}

}  // namespace k3::gateway
