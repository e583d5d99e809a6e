// The Messages API's routes on the HTTP API's router: POST /v1/messages (one
// JSON message, or the Messages event stream) and POST
// /v1/messages/count_tokens. The request converts to the chat call
// (messages_protocol.h) and runs through GatewayCore::serve as chat
// completions do (counted as api="messages"; cancelled when the client
// hangs up); the stream's events are messages_events.h. Errors are
// Anthropic's shape. API keys are checked in front of every route
// (http_api.cpp: Authorization Bearer or x-api-key).
#pragma once

#include "gateway/core/gateway_core.h"
#include "gateway/http/router.h"

namespace k3::gateway {

// Adds both routes; `core` outlives the router.
void add_messages_routes(Router& router, GatewayCore* core);

// The paths whose errors take Anthropic's shape (/v1/messages and below).
bool is_messages_path(const std::string& path);

}  // namespace k3::gateway
