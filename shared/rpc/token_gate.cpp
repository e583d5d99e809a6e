#include "shared/rpc/token_gate.h"

#include <grpc/grpc_security.h>

#include <algorithm>
#include <utility>

namespace k3::rpc {
namespace {

// gRPC passes the request's pseudo-headers with the metadata; ":path" is the
// full method name.
constexpr std::string_view kPathKey = ":path";

std::string_view view(grpc::string_ref r) {
  return std::string_view(r.data(), r.size());
}

class TokenGateProcessor final : public grpc::AuthMetadataProcessor {
 public:
  explicit TokenGateProcessor(std::shared_ptr<const TokenGate> gate) : gate_(std::move(gate)) {}

  bool IsBlocking() const override { return false; }

  grpc::Status Process(const InputMetadata& md, grpc::AuthContext*, OutputMetadata*,
                       OutputMetadata*) override {
    std::string_view method;
    std::optional<std::string_view> auth;
    for (const auto& [k, v] : md) {
      if (view(k) == kPathKey) method = view(v);
      if (view(k) == kAuthMetadataKey) auth = view(v);
    }
    return gate_->check(method, auth);
  }

 private:
  std::shared_ptr<const TokenGate> gate_;
};

// The C processor gRPC's core calls for InsecureCredentialsWithProcessor:
// converts the metadata and hands it to the C++ processor, inline.
void process_inline(void* state, grpc_auth_context*, const grpc_metadata* md, size_t num_md,
                    grpc_process_auth_metadata_done_cb cb, void* user_data) {
  auto* processor = static_cast<std::shared_ptr<grpc::AuthMetadataProcessor>*>(state);
  grpc::AuthMetadataProcessor::InputMetadata in;
  for (size_t i = 0; i < num_md; ++i) {
    in.emplace(grpc::string_ref(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(md[i].key)),
                                GRPC_SLICE_LENGTH(md[i].key)),
               grpc::string_ref(reinterpret_cast<const char*>(GRPC_SLICE_START_PTR(md[i].value)),
                                GRPC_SLICE_LENGTH(md[i].value)));
  }
  grpc::AuthMetadataProcessor::OutputMetadata consumed, response;
  const grpc::Status s = (*processor)->Process(in, nullptr, &consumed, &response);
  // What the processor consumed is removed from the call's metadata.
  std::vector<grpc_metadata> out;
  out.reserve(consumed.size());
  for (const auto& [k, v] : consumed) {
    grpc_metadata m{};
    m.key = grpc_slice_from_static_buffer(k.data(), k.size());
    m.value = grpc_slice_from_static_buffer(v.data(), v.size());
    out.push_back(m);
  }
  cb(user_data, out.data(), out.size(), nullptr, 0, static_cast<grpc_status_code>(s.error_code()),
     s.ok() ? nullptr : s.error_message().c_str());
}

void destroy_processor(void* state) {
  delete static_cast<std::shared_ptr<grpc::AuthMetadataProcessor>*>(state);
}

}  // namespace

grpc::Status TokenGate::check(std::string_view method,
                              std::optional<std::string_view> authorization) const {
  if (!method.empty() &&
      std::find(open_methods.begin(), open_methods.end(), method) != open_methods.end())
    return grpc::Status::OK;
  if (authorization.has_value() && accepts && accepts(*authorization)) return grpc::Status::OK;
  if (on_refused) on_refused(method, authorization.has_value());
  return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                      authorization.has_value() ? wrong_message : missing_message);
}

TokenGate bearer_token_gate(std::string token) {
  TokenGate g;
  g.accepts = [token = std::move(token)](std::string_view value) {
    const std::string got = token_of_bearer(std::string(value));
    return !got.empty() && token_equals(got, token);
  };
  return g;
}

std::shared_ptr<grpc::AuthMetadataProcessor> token_gate_processor(
    std::shared_ptr<const TokenGate> gate) {
  return std::make_shared<TokenGateProcessor>(std::move(gate));
}

void InsecureCredentialsWithProcessor::SetAuthMetadataProcessor(
    const std::shared_ptr<grpc::AuthMetadataProcessor>& processor) {
  processor_ = processor;
}

int InsecureCredentialsWithProcessor::AddPortToServer(const std::string& addr,
                                                      grpc_server* server) {
  grpc_server_credentials* creds = grpc_insecure_server_credentials_create();
  if (processor_ != nullptr) {
    grpc_auth_metadata_processor p{};
    p.process = process_inline;
    p.destroy = destroy_processor;
    p.state = new std::shared_ptr<grpc::AuthMetadataProcessor>(processor_);
    grpc_server_credentials_set_auth_metadata_processor(creds, p);
  }
  const int port = grpc_server_add_http2_port(server, addr.c_str(), creds);
  grpc_server_credentials_release(creds);
  return port;
}

StatusOr<std::shared_ptr<grpc::ServerCredentials>> gated_server_credentials(
    const std::optional<TlsFiles>& tls, std::shared_ptr<const TokenGate> gate) {
  std::shared_ptr<grpc::ServerCredentials> creds;
  if (tls.has_value()) {
    K3_ASSIGN_OR_RETURN(creds, server_tls_credentials(*tls));
  } else if (gate != nullptr) {
    creds = std::make_shared<InsecureCredentialsWithProcessor>();
  } else {
    creds = grpc::InsecureServerCredentials();
  }
  if (gate != nullptr) creds->SetAuthMetadataProcessor(token_gate_processor(std::move(gate)));
  return creds;
}

}  // namespace k3::rpc
