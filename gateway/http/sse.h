// Server-sent events framing for streamed responses (OpenAI's "data: "
// lines, ended by "data: [DONE]").
//
// Thread-safe (no shared state).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace k3::gateway {

// "data: " + dump_body(j) + "\n\n" (dump_body: gateway/core/json_text.h).
std::string sse_event(const nlohmann::json& j);
// "data: [DONE]\n\n".
std::string sse_done();

}  // namespace k3::gateway
