// HTTP/1.1 response text as the server writes it (status line, headers,
// Content-Length or chunked framing), the JSON error responses of the wire
// limits and routing, and request ids.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "gateway/http/http_message.h"

namespace k3::gateway {

// Status line, Content-Type, the response's headers (CR and LF in names or
// values dropped), X-Request-Id, Connection, then Content-Length and the body
// or (chunked) Transfer-Encoding: chunked and no body.
std::string serialize_response(const HttpResponse& r, std::string_view request_id, bool keep_alive,
                               bool chunked);
// One chunk of a chunked body: size in hex, CRLF, data, CRLF.
std::string chunk_frame(std::string_view data);

// An OpenAI-shaped error response: {"error": {"message", "type", "param",
// "code"}} with this status and code; `param` names the request field it is
// about ("" = null).
HttpResponse error_response(int status, std::string_view code, std::string message,
                            std::string_view param = "");

// "req-" and 20 random alphanumerics.
std::string new_request_id();
// A client's X-Request-Id when it is 1..64 characters of [A-Za-z0-9._:-].
std::optional<std::string> sane_request_id(std::optional<std::string_view> v);

}  // namespace k3::gateway
