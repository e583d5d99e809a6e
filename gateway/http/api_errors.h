// An error as the OpenAI API's body for it (the HTTP status itself comes
// from http_status, gateway/core/status_codes.h).
//
// Thread-safe (no shared state).
#pragma once

#include <nlohmann/json.hpp>

#include "shared/status.h"

namespace k3::gateway {

// {"error": {"message", "type", "param", "code"}}: param the request field
// the error is about (with_param), else null; type
// "invalid_request_error" for 4xx, "server_error" for 5xx; code a short
// string ("invalid_argument", "model_not_found", "context_length_exceeded",
// "rate_limit_exceeded", "invalid_api_key", ...).
nlohmann::json error_json(const Status& status);

}  // namespace k3::gateway
