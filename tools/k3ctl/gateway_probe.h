// k3ctl's check that a k3serve gateway's gRPC API is at the address (chat at
// start, bench serve before its load, complete after a call that could not
// reach it). When not, says why in words an operator can act on: nothing
// listening, an HTTP port (the OpenAI API) given instead of the gRPC one,
// TLS on one side only, or the gateway's own error.
#pragma once

#include <string>

#include "k3serve/v1/gateway.grpc.pb.h"
#include "shared/status.h"
#include "tools/k3ctl/gateway_client.h"

namespace k3::tools {

// What a raw connection to `address` (HOST:PORT or unix:PATH) finds.
enum class PortKind {
  kNothingListening,  // refused, no such socket, or no route
  kHttp1,             // answered an HTTP/1.1 request: an HTTP server
  kTls,               // answered with a TLS record: a TLS server
  kOther,             // accepted, but answered neither way (e.g. gRPC in clear)
  kUnknown,           // could not tell (bad address, timeout)
};
// Connects to `address` and sends one HTTP/1.1 request (then, when that gets
// no answer, tries a TLS handshake), waiting at most
// `seconds` in all. *detail gets the connect error, when there is one.
PortKind probe_port(const std::string& address, double seconds, std::string* detail);

// Calls ListModels with a deadline of `seconds`. On failure the status
// message explains it (see the file comment).
StatusOr<k3serve::v1::ListModelsResponse> check_gateway(k3serve::v1::Gateway::Stub& stub,
                                                        const GatewayOptions& options,
                                                        double seconds);

// What to tell the user about a call to the gateway that ended with
// `status`: when it could not reach the gateway (UNAVAILABLE, or
// DEADLINE_EXCEEDED), check_gateway's explanation (an HTTP port, nothing
// listening, TLS); otherwise, or when the gateway answers the check,
// describe_error(status).
std::string explain_call_failure(k3serve::v1::Gateway::Stub& stub, const GatewayOptions& options,
                                 const grpc::Status& status, double seconds);

}  // namespace k3::tools
