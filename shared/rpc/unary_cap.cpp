#include "shared/rpc/unary_cap.h"

#include <google/protobuf/descriptor.h>

namespace k3::rpc::internal {
namespace {

// MarkMethodRawCallback is protected in grpc::Service; a pointer to it taken
// through a derived class calls it on any service.
struct ServiceAccess : grpc::Service {
  static void mark(grpc::Service* s, int index, grpc::internal::MethodHandler* h) {
    (s->*(&ServiceAccess::MarkMethodRawCallback))(index, h);
  }
};

}  // namespace

StatusOr<int> unary_method_index(const std::string& method, const std::string& request_type,
                                 const std::string& response_type) {
  // gRPC numbers a service's methods in the order the .proto declares them,
  // as the descriptor does.
  const google::protobuf::MethodDescriptor* m =
      google::protobuf::DescriptorPool::generated_pool()->FindMethodByName(method);
  if (m == nullptr) return absl::InvalidArgumentError(cat("no gRPC method ", method));
  if (m->client_streaming() || m->server_streaming())
    return absl::InvalidArgumentError(cat(method, " is not unary"));
  if (m->input_type()->full_name() != request_type ||
      m->output_type()->full_name() != response_type)
    return absl::InvalidArgumentError(cat(method, " takes ", m->input_type()->full_name(),
                                          " and returns ", m->output_type()->full_name(), ", not ",
                                          request_type, " and ", response_type));
  return m->index();
}

void mark_raw_callback(grpc::Service* service, int index, grpc::internal::MethodHandler* handler) {
  ServiceAccess::mark(service, index, handler);
}

grpc::Status too_large(const std::string& method, size_t bytes, size_t cap) {
  return grpc::Status(
      grpc::StatusCode::RESOURCE_EXHAUSTED,
      cat(method, ": a request of ", bytes, " bytes is over this method's cap of ", cap, " bytes"));
}

}  // namespace k3::rpc::internal
