// The gateway's configuration: one struct, from a config file (JSON, the
// flags' long names as keys: shared/base/config_file.h) then flags, validated,
// logged as one line.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "shared/rpc/server.h"
#include "shared/status.h"

namespace k3::gateway {

struct GatewayConfig {
  std::string model_dir;  // tokenizer and config.json
  // --served-model-name (alias --model-name; repeatable): every id requests
  // may use; validate() fills the default (served_model.h) and dedupes.
  std::vector<std::string> served_model_names;
  std::string model_name;  // the first of them: the id replies carry
  std::string engined = "unix:/run/k3serve/engined.sock";
  std::string grpc_listen = "127.0.0.1:50051";
  std::string http_listen = "127.0.0.1:8080";
  std::string topology_file;        // expertd instances (JSON); empty: engined's own --expertd
  std::string api_keys_file;        // one key per line; empty: no authentication
  std::string ready_file;           // written with the bound addresses once serving
  int max_queue = 64;               // requests waiting beyond the running ones
  int64_t max_prompt_tokens = 0;    // 0: the model's context
  int64_t max_tokens_limit = 0;     // most tokens generated per request (0: the context's room)
  double request_timeout_s = 0;     // a request's whole time, queueing included (0 = none)
  double progress_timeout_s = 300;  // a running request with no event from engined fails
  // How often a stream with nothing else to send gets a progress note or a
  // keep-alive (docs/openai-api.md); not a flag: tests shorten it.
  double progress_interval_s = 5;
  // HTTP wire limits (gateway/http/http_server.h).
  size_t max_body_bytes = 8u << 20;
  size_t max_header_bytes = 64u << 10;
  int max_header_count = 100;
  int max_connections = 1024;
  double header_timeout_s = 10;  // a request's whole head and body
  double idle_timeout_s = 60;    // a keep-alive connection with nothing to do
  double write_timeout_s = 30;   // a client that does not read is dropped
  int http_io_threads = 2;       // parse and write
  int http_threads = 128;        // handlers: each running request holds one
  // TLS for both public APIs; off: plaintext, refused on a non-loopback
  // address unless allow_plaintext.
  std::string tls_cert;
  std::string tls_key;
  bool allow_plaintext = false;
  std::string cors_origin;      // empty: no CORS headers
  bool metrics_public = false;  // /metrics without an API key
  bool web_ui = true;           // the web chat page at / (gateway/http/web_ui.h)
  bool strict_fields = false;   // refuse request fields docs/openai-api.md does not list
  double poll_seconds = 2.0;
  std::string log_level = "info";
  // --log-format: text or json (shared/base/log_format.h)
  std::string log_format = "text";
  std::string config_file;  // read before parsing (shared/base/config_file.h)

  void add_flags(CLI::App& app);
  Status validate();
  std::string summary() const;
  // The public gRPC server's options: TLS from tls_cert/tls_key when given.
  rpc::ServerOptions grpc_server_options() const;
};

// Whether a listen address only accepts local clients (127.0.0.0/8, ::1,
// localhost, a unix socket).
bool is_loopback_address(const std::string& address);

}  // namespace k3::gateway
