// A receive cap of its own for one unary method of a service.
//
// gRPC's receive cap (ServerBuilder::SetMaxReceiveMessageSize) is one number
// for the whole server, so a server whose streaming method takes large
// messages (expertd's Experts: a prefill chunk's activations) would take
// them on Describe, Health and Stats too. gRPC has no per-method cap, and a
// unary request is read whole before any handler runs; what a handler can do
// is look at the request's length before parsing it. cap_unary serves the
// method through gRPC's raw callback API: the handler gets the request as a
// ByteBuffer, refuses one longer than its cap (RESOURCE_EXHAUSTED) without
// parsing it, and only then parses and answers. The bytes it refuses were
// already received, up to the server's cap: that is bounded by the server
// cap and, with a TokenGate (token_gate.h), only an authenticated peer gets
// that far.
#pragma once

#include <cstddef>
#include <functional>
#include <string>

#include <grpcpp/grpcpp.h>
#include <grpcpp/impl/codegen/server_callback_handlers.h>
#include <grpcpp/impl/service_type.h>

#include "shared/status.h"

namespace k3::rpc {

// Requests of the small methods (Health, Describe, Stats: empty messages)
// are refused above this.
inline constexpr size_t kSmallRequestBytes = 4096;

namespace internal {

// The index of `method` ("package.Service.Method") in its service, checked
// against the request and response types; INVALID_ARGUMENT naming what
// does not match.
StatusOr<int> unary_method_index(const std::string& method, const std::string& request_type,
                                 const std::string& response_type);

// grpc::Service::MarkMethodRawCallback (protected) on `service`.
void mark_raw_callback(grpc::Service* service, int index, grpc::internal::MethodHandler* handler);

// RESOURCE_EXHAUSTED for a request of `bytes` over `cap`, naming `method`.
grpc::Status too_large(const std::string& method, size_t bytes, size_t cap);

}  // namespace internal

// Serves unary `method` ("package.Service.Method", e.g.
// "k3serve.v1.RemoteExpertService.Describe") of `service` by `handler`,
// refusing a request over `max_bytes` before parsing it. Call before the
// server starts. The handler runs on gRPC's callback threads, must not
// block long, and gets no server context (it answers from the request).
template <class Req, class Resp>
Status cap_unary(grpc::Service* service, const std::string& method, size_t max_bytes,
                 std::function<grpc::Status(const Req&, Resp*)> handler) {
  K3_ASSIGN_OR_RETURN(int index,
                      internal::unary_method_index(method, Req::descriptor()->full_name(),
                                                   Resp::descriptor()->full_name()));
  auto* h = new grpc::internal::CallbackUnaryHandler<grpc::ByteBuffer, grpc::ByteBuffer>(
      [method, max_bytes, handler](grpc::CallbackServerContext* ctx, const grpc::ByteBuffer* in,
                                   grpc::ByteBuffer* out) {
        grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
        const size_t n = in->Length();
        if (n > max_bytes) {
          reactor->Finish(internal::too_large(method, n, max_bytes));
          return reactor;
        }
        Req req;
        grpc::ByteBuffer copy(*in);  // Deserialize takes a mutable one (shares the slices)
        grpc::Status s = grpc::SerializationTraits<Req>::Deserialize(&copy, &req);
        if (!s.ok()) {
          reactor->Finish(s);
          return reactor;
        }
        Resp resp;
        s = handler(req, &resp);
        if (s.ok()) {
          bool own = false;
          s = grpc::SerializationTraits<Resp>::Serialize(resp, out, &own);
        }
        reactor->Finish(s);
        return reactor;
      });
  internal::mark_raw_callback(service, index, h);
  return absl::OkStatus();
}

}  // namespace k3::rpc
