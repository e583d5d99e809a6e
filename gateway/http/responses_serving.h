// POST /v1/responses served: the body parsed into chat's core request
// (responses_protocol.h), run through GatewayCore::serve as chat completions
// are (admission, API-key check and metrics k3_requests_total{api="responses"}
// as every route; a client that hangs up cancels the generation), and the
// core's deltas turned into output items (responses_events.h): one JSON
// response object, or SSE events whose head goes out once the request is
// admitted or queued, with progress comments (": queued N", ": prefill
// D/T", ": keep-alive") between them as chat streams send. An error before
// the stream opens is a plain HTTP error; after, response.failed.
#pragma once

#include <memory>

#include "gateway/core/gateway_core.h"
#include "gateway/http/http_message.h"

namespace k3::gateway {

// Thread-safe (the core is); blocks the calling worker until the reply is out.
void serve_responses(GatewayCore& core, const HttpRequest& req,
                     const std::shared_ptr<Exchange>& ex);

}  // namespace k3::gateway
