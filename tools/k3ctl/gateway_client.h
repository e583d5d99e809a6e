// k3ctl's client side of the gateway's public gRPC API (proto/k3serve/v1/
// gateway.proto): connection and per-call options, request building, and the
// streamed Chat / Complete replies handed piece by piece to a ReplySink.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <CLI/CLI.hpp>

#include "k3serve/v1/gateway.grpc.pb.h"

namespace k3::tools {

// Where the gateway is and how each call goes to it.
struct GatewayOptions {
  std::string address = "127.0.0.1:50051";  // HOST:PORT or unix:PATH
  std::string api_key;                      // sent as `authorization: Bearer KEY` when set
  double timeout_s = 0;                     // per call deadline; 0: none
  std::string tls_ca;                       // PEM CA file: TLS to the gateway; empty: in clear
  std::string tls_ca_pem;                   // its contents, read when the flags are parsed
};

// What a chat turn asks for, besides the messages.
struct ChatOptions {
  std::string model;     // empty: the gateway's only model
  std::string system;    // empty: no system message
  bool thinking = true;  // false sends enable_thinking = false
  std::string effort;    // low | high | max; empty: the gateway's default
  bool has_temperature = false;
  float temperature = 1.0f;
  uint32_t max_tokens = 0;  // 0: up to the context limit
};

// Adds --gateway, --api-key (default $K3_API_KEY), --timeout and --tls-ca to
// `cmd`. `options` must outlive `cmd`.
void add_gateway_flags(CLI::App* cmd, GatewayOptions& options);
// Adds --model, --system, --no-thinking, --thinking-effort, --temperature and
// --max-tokens to `cmd`. `options` must outlive `cmd` (callbacks write to it).
void add_chat_flags(CLI::App* cmd, ChatOptions& options);
// "" when `effort` is acceptable, else what is wrong with it.
std::string check_effort(const std::string& effort);

std::unique_ptr<k3serve::v1::Gateway::Stub> connect_gateway(const GatewayOptions& options);
// Adds the API key metadata and the deadline to a fresh call's context.
void prepare_context(const GatewayOptions& options, grpc::ClientContext* ctx);

// "CODE: message", e.g. "UNAVAILABLE: failed to connect to all addresses".
std::string describe_error(const grpc::Status& status);
// "" when `text` is valid UTF-8 (protobuf strings must be), else the problem.
std::string check_utf8(std::string_view text);

// A ChatRequest carrying options' fields, the system message (when set) and then
// `history` in order.
k3serve::v1::ChatRequest make_chat_request(const ChatOptions& options,
                                           const std::vector<k3serve::v1::ChatMessage>& history);
k3serve::v1::ChatMessage make_message(std::string role, std::string content);

// Receives a streamed reply as it arrives. Called on the thread that streams.
class ReplySink {
 public:
  virtual ~ReplySink() = default;
  virtual void on_reasoning(std::string_view text) = 0;
  virtual void on_content(std::string_view text) = 0;
  // A complete tool call (after the stream ended, in index order).
  virtual void on_tool_call(const k3serve::v1::ToolCall& call) = 0;
  // Where the request stands before its first text (queued, reading the
  // prompt); sent by the gateway at least every 5 s until then.
  virtual void on_progress(const k3serve::v1::Progress&) {}
};

// A whole reply: what the sink saw, assembled, and the closing ChatDone.
struct ChatReply {
  std::string reasoning;
  std::string content;
  std::vector<k3serve::v1::ToolCall> tool_calls;
  bool has_done = false;
  k3serve::v1::ChatDone done;

  // The reply as the assistant message of the conversation's next turn.
  k3serve::v1::ChatMessage as_message() const;
};

// Runs a Chat call to its end, feeding `sink`; fills *reply with what arrived
// (also when the call fails part way). Returns the call's final status.
grpc::Status stream_chat(k3serve::v1::Gateway::Stub& stub, grpc::ClientContext* ctx,
                         const k3serve::v1::ChatRequest& request, ReplySink& sink,
                         ChatReply* reply);
// Runs a Complete call to its end: every text event goes to sink.on_content.
grpc::Status stream_complete(k3serve::v1::Gateway::Stub& stub, grpc::ClientContext* ctx,
                             const k3serve::v1::CompleteRequest& request, ReplySink& sink,
                             ChatReply* reply);

// One line for --verbose: "usage: prompt 12, completion 30 (cached 0, restored 0), finish stop, id
// X".
std::string usage_line(const ChatReply& reply);

}  // namespace k3::tools
