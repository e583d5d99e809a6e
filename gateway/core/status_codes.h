// The one Status -> wire code map, for both public APIs: the HTTP status and
// the short OpenAI-style error code a Status stands for. gRPC callers get the
// Status's own code (shared/rpc); the HTTP code travels as a payload where
// the canonical codes are not precise enough (413, 404 of a route, 405, 431).
#pragma once

#include <string>
#include <string_view>

#include "shared/status.h"

namespace k3::gateway {

// Payloads: the HTTP code ("413"), the error code ("not_found") and the
// request field an error is about ("messages[0].name": OpenAI's `param`).
inline constexpr std::string_view kHttpPayload = "k3.http";
inline constexpr std::string_view kErrorCodePayload = "k3.error_code";
inline constexpr std::string_view kParamPayload = "k3.param";

// `base` carrying an explicit HTTP code (400..599) and error code.
Status with_http_code(Status base, int http, std::string_view error_code);

// `base` naming the request field it is about (OpenAI's error `param`).
Status with_param(Status base, std::string_view param);
// The field with_param named, "" when none.
std::string error_param(const Status& status);

// A status that http_status maps to 413 Payload Too Large (a body or prompt
// over the gateway's limit). Its code is InvalidArgument, which is what a gRPC
// caller sees.
Status payload_too_large(std::string message);

// OK 200; an HTTP code in the kHttpPayload payload wins; then InvalidArgument
// 400, OutOfRange 400 (context length, as OpenAI), FailedPrecondition 400,
// Unauthenticated 401, PermissionDenied 403, NotFound 404, Aborted 409,
// ResourceExhausted 429, Cancelled 499, Unimplemented 501, Unavailable 503,
// DeadlineExceeded 504, anything else 500.
int http_status(const Status& status);

// The short error code: the kErrorCodePayload payload when present, else
// "payload_too_large" (413), "invalid_argument", "context_length_exceeded",
// "failed_precondition", "invalid_api_key", "permission_denied",
// "model_not_found", "aborted", "rate_limit_exceeded", "cancelled",
// "not_implemented", "service_unavailable", "timeout", "internal_error".
std::string error_code(const Status& status);

}  // namespace k3::gateway
