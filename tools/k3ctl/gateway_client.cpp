#include "tools/k3ctl/gateway_client.h"

#include <chrono>
#include <cstdlib>
#include <map>
#include <utility>

#include "absl/status/status.h"
#include "shared/base/file.h"
#include "shared/status.h"
#include "shared/tokenizer/utf8.h"

namespace k3::tools {

namespace v1 = k3serve::v1;

void add_gateway_flags(CLI::App* cmd, GatewayOptions& options) {
  if (const char* key = std::getenv("K3_API_KEY")) options.api_key = key;
  cmd->add_option("--gateway", options.address, "gateway gRPC address: HOST:PORT or unix:PATH")
      ->capture_default_str();
  // The key read from the environment must not show in --help as a default.
  cmd->add_option("--api-key", options.api_key,
                  "API key, sent as `authorization: Bearer KEY` (default: $K3_API_KEY)")
      ->default_str("");
  cmd->add_option("--timeout", options.timeout_s, "deadline of each call in seconds (default none)")
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--tls-ca", options.tls_ca,
                  "PEM file of the CA that signed the gateway's certificate: speak TLS "
                  "(default: none, in clear)")
      ->check(CLI::ExistingFile)
      ->each([&options](const std::string& path) {
        StatusOr<std::string> pem = base::read_small_file(path, 1u << 20);
        if (!pem.ok()) throw CLI::ValidationError("--tls-ca", msg(pem.status()));
        options.tls_ca_pem = std::move(*pem);
      });
}

void add_chat_flags(CLI::App* cmd, ChatOptions& options) {
  cmd->add_option("--model", options.model, "model id (default: the gateway's only model)");
  cmd->add_option("--system", options.system, "system message");
  cmd->add_flag_callback(
      "--no-thinking", [&options] { options.thinking = false; },
      "answer without the think channel");
  cmd->add_option("--thinking-effort", options.effort,
                  "low | high | max (default: max, the model's)");
  cmd->add_option_function<float>(
      "--temperature",
      [&options](float t) {
        options.temperature = t;
        options.has_temperature = true;
      },
      "sampling temperature (0 = greedy; default: the gateway's, 1.0)");
  cmd->add_option("--max-tokens", options.max_tokens, "most tokens to generate (0: no limit)");
}

std::string check_effort(const std::string& effort) {
  if (effort.empty() || effort == "low" || effort == "high" || effort == "max") return "";
  return cat("--thinking-effort must be low, high or max, not '", effort, "'");
}

std::unique_ptr<v1::Gateway::Stub> connect_gateway(const GatewayOptions& options) {
  std::shared_ptr<grpc::ChannelCredentials> credentials = grpc::InsecureChannelCredentials();
  if (!options.tls_ca.empty()) {
    grpc::SslCredentialsOptions ssl;
    ssl.pem_root_certs = options.tls_ca_pem;
    credentials = grpc::SslCredentials(ssl);
  }
  return v1::Gateway::NewStub(grpc::CreateChannel(options.address, credentials));
}

void prepare_context(const GatewayOptions& options, grpc::ClientContext* ctx) {
  if (!options.api_key.empty()) ctx->AddMetadata("authorization", "Bearer " + options.api_key);
  if (options.timeout_s > 0)
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::duration_cast<std::chrono::system_clock::duration>(
                          std::chrono::duration<double>(options.timeout_s)));
}

std::string describe_error(const grpc::Status& status) {
  // absl's codes are gRPC's codes (same numbers), and absl names them.
  const std::string code =
      absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code()));
  return cat(code, ": ", status.error_message());
}

std::string check_utf8(std::string_view text) {
  if (std::optional<size_t> bad = tokenizer::first_invalid_utf8(text))
    return cat("the input is not valid UTF-8 (ill-formed byte at offset ", *bad, ")");
  return "";
}

v1::ChatMessage make_message(std::string role, std::string content) {
  v1::ChatMessage m;
  m.set_role(std::move(role));
  m.set_content(std::move(content));
  return m;
}

v1::ChatRequest make_chat_request(const ChatOptions& options,
                                  const std::vector<v1::ChatMessage>& history) {
  v1::ChatRequest req;
  req.set_model(options.model);
  if (!options.system.empty()) *req.add_messages() = make_message("system", options.system);
  for (const v1::ChatMessage& m : history) *req.add_messages() = m;
  req.set_max_tokens(options.max_tokens);
  if (options.has_temperature) req.mutable_sampling()->set_temperature(options.temperature);
  if (!options.thinking) req.set_enable_thinking(false);
  if (options.thinking && !options.effort.empty()) req.set_thinking_effort(options.effort);
  return req;
}

v1::ChatMessage ChatReply::as_message() const {
  v1::ChatMessage m = make_message("assistant", content);
  m.set_reasoning_content(reasoning);
  for (const v1::ToolCall& call : tool_calls) *m.add_tool_calls() = call;
  return m;
}

grpc::Status stream_chat(v1::Gateway::Stub& stub, grpc::ClientContext* ctx,
                         const v1::ChatRequest& request, ReplySink& sink, ChatReply* reply) {
  *reply = ChatReply{};
  // Tool calls arrive as fragments keyed by index; assembled, then shown whole.
  std::map<uint32_t, v1::ToolCall> calls;
  std::unique_ptr<grpc::ClientReader<v1::ChatEvent>> reader = stub.Chat(ctx, request);
  v1::ChatEvent event;
  while (reader->Read(&event)) {
    if (event.has_done()) {
      reply->has_done = true;
      reply->done = event.done();
      continue;
    }
    if (event.has_progress()) {
      sink.on_progress(event.progress());
      continue;
    }
    const v1::ChatDelta& delta = event.delta();
    if (!delta.reasoning_content().empty()) {
      reply->reasoning += delta.reasoning_content();
      sink.on_reasoning(delta.reasoning_content());
    }
    if (!delta.content().empty()) {
      reply->content += delta.content();
      sink.on_content(delta.content());
    }
    for (const v1::ToolCallDelta& d : delta.tool_calls()) {
      v1::ToolCall& call = calls[d.index()];
      if (!d.id().empty()) call.set_id(d.id());
      if (!d.name().empty()) call.set_name(d.name());
      call.mutable_arguments()->append(d.arguments());
    }
  }
  grpc::Status status = reader->Finish();
  for (auto& [index, call] : calls) {
    reply->tool_calls.push_back(call);
    if (status.ok()) sink.on_tool_call(call);
  }
  return status;
}

grpc::Status stream_complete(v1::Gateway::Stub& stub, grpc::ClientContext* ctx,
                             const v1::CompleteRequest& request, ReplySink& sink,
                             ChatReply* reply) {
  *reply = ChatReply{};
  std::unique_ptr<grpc::ClientReader<v1::CompleteEvent>> reader = stub.Complete(ctx, request);
  v1::CompleteEvent event;
  while (reader->Read(&event)) {
    if (event.has_done()) {
      reply->has_done = true;
      reply->done = event.done();
    } else if (event.has_progress()) {
      sink.on_progress(event.progress());
    } else if (!event.text().empty()) {
      reply->content += event.text();
      sink.on_content(event.text());
    }
  }
  return reader->Finish();
}

std::string usage_line(const ChatReply& reply) {
  if (!reply.has_done) return "usage: (the gateway sent no usage)";
  const v1::Usage& u = reply.done.usage();
  return cat("usage: prompt ", u.prompt_tokens(), ", completion ", u.completion_tokens(),
             " (cached ", u.cached_tokens(), ", restored ", u.restored_tokens(), "), finish ",
             reply.done.finish_reason(), ", id ", reply.done.id());
}

}  // namespace k3::tools
