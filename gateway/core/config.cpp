#include "gateway/core/config.h"
#include "shared/base/host_port.h"

#include <algorithm>

#include "gateway/core/served_model.h"

namespace k3::gateway {

void GatewayConfig::add_flags(CLI::App& app) {
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--config", config_file,
                 "config file: JSON object of flag names to values; flags given here override it");
  app.add_option("--model", model_dir, "model directory (tokenizer, config.json)")->required();
  app.add_option("--served-model-name,--model-name", served_model_names,
                 "a model id requests may use, repeatable for aliases; the first is the one "
                 "replies carry (default: kimi-k3 for a K3 checkpoint, else the directory's name)")
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll);
  app.add_option("--engined", engined, "engined control address (unix:PATH or HOST:PORT)");
  app.add_option("--grpc-listen", grpc_listen, "gRPC API address (HOST:PORT; port 0 = any)");
  app.add_option("--http-listen", http_listen, "OpenAI HTTP API address (HOST:PORT; port 0 = any)");
  app.add_option("--topology", topology_file, "expertd topology file (JSON)");
  app.add_option("--api-keys", api_keys_file, "API keys file (one per line); enables auth");
  app.add_option("--ready-file", ready_file, "write 'http=HOST:PORT grpc=HOST:PORT' here when up");
  app.add_option("--max-queue", max_queue, "requests that may wait for a session (then 429)");
  app.add_option("--max-prompt-tokens", max_prompt_tokens, "longest prompt accepted (0 = context)");
  app.add_option("--max-tokens-limit", max_tokens_limit,
                 "most tokens one request may generate: a larger max_tokens is refused (400), "
                 "none given means this many (0 = what the context leaves)");
  app.add_option("--request-timeout-s", request_timeout_s,
                 "cap on a request's whole time in seconds, queueing included (0 = none): a "
                 "non-streamed reply cut by it returns what it generated (finish_reason length, "
                 "header X-K3-Truncated: deadline), one with no token yet gets 504")
      ->capture_default_str();
  app.add_option("--progress-timeout-s", progress_timeout_s,
                 "a running request that gets no token and no prompt progress from engined for "
                 "this many seconds fails (504, or an error event in a stream); time queued for "
                 "admission does not count (0 = never)")
      ->capture_default_str();
  app.add_option("--max-body-bytes", max_body_bytes, "largest HTTP request body (else 413)")
      ->capture_default_str();
  app.add_option("--max-header-bytes", max_header_bytes,
                 "largest HTTP request head: request line and headers (else 431)")
      ->capture_default_str();
  app.add_option("--max-header-count", max_header_count, "most HTTP header fields (else 431)")
      ->capture_default_str();
  app.add_option("--max-connections", max_connections,
                 "open HTTP connections (over it: 503 with Retry-After, then close)")
      ->capture_default_str();
  app.add_option("--header-timeout-s", header_timeout_s,
                 "deadline for one HTTP request's head and body (else 408, closed)")
      ->capture_default_str();
  app.add_option("--idle-timeout-s", idle_timeout_s,
                 "an idle keep-alive HTTP connection is closed after this")
      ->capture_default_str();
  app.add_option("--write-timeout-s", write_timeout_s,
                 "an HTTP client that takes no bytes for this long is dropped (its request "
                 "cancelled)")
      ->capture_default_str();
  app.add_option("--http-io-threads", http_io_threads, "HTTP I/O threads (parsing, writing)")
      ->capture_default_str();
  app.add_option("--http-threads", http_threads,
                 "HTTP handler threads (each running or queued request holds one)")
      ->capture_default_str();
  app.add_option("--tls-cert", tls_cert, "PEM certificate chain: HTTPS and gRPC over TLS");
  app.add_option("--tls-key", tls_key, "PEM private key of --tls-cert");
  app.add_flag("--allow-plaintext", allow_plaintext, "serve without TLS on a non-loopback address");
  app.add_option("--cors-origin", cors_origin,
                 "send CORS headers allowing this origin (and answer OPTIONS preflights)");
  app.add_flag("--metrics-public", metrics_public, "/metrics needs no API key");
  app.add_flag_callback(
      "--no-web-ui", [this] { web_ui = false; },
      "do not serve the web chat page at / (then 404; default: served, and the page needs no "
      "API key but its API calls do)");
  app.add_flag("--strict-fields", strict_fields,
               "refuse (400, naming it) a request field the route's page in docs/ does not list "
               "(openai-api.md, responses-api.md, messages-api.md; default: accept and ignore it, "
               "naming it in the x-k3-ignored-fields header and a log line)");
  app.add_option("--poll-seconds", poll_seconds, "topology and health poll period");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
  app.add_option("--log-format", log_format,
                 "log lines: text (time with its UTC offset, level, component, message) or json "
                 "(one object per line: time, level, daemon, message, request_id)")
      ->check(CLI::IsMember({"text", "json"}));
}

bool is_loopback_address(const std::string& a) {
  if (a.rfind("unix:", 0) == 0) return true;
  auto hp = base::parse_host_port(a);
  if (!hp.ok()) return false;
  const std::string& h = hp->host;
  return h == "localhost" || h == "::1" || h.rfind("127.", 0) == 0;
}

Status GatewayConfig::validate() {
  if (served_model_names.empty() && !model_name.empty()) served_model_names = {model_name};
  if (served_model_names.empty()) {
    K3_ASSIGN_OR_RETURN(ModelIdentity identity, read_model_identity(model_dir));
    served_model_names = {default_served_name(model_dir, identity)};
  }
  std::vector<std::string> names;
  for (const std::string& n : served_model_names) {
    if (n.empty() || n.find_first_of("\r\n") != std::string::npos)
      return absl::InvalidArgumentError("--served-model-name must be one line, not empty");
    if (std::find(names.begin(), names.end(), n) == names.end()) names.push_back(n);
  }
  served_model_names = std::move(names);
  model_name = served_model_names.front();
  if (max_queue < 0 || max_queue > 100000)
    return absl::InvalidArgumentError(cat("--max-queue ", max_queue, " is outside [0, 100000]"));
  if (max_prompt_tokens < 0) return absl::InvalidArgumentError("--max-prompt-tokens must be >= 0");
  if (max_tokens_limit < 0) return absl::InvalidArgumentError("--max-tokens-limit must be >= 0");
  if (!(request_timeout_s >= 0) || request_timeout_s > 86400 * 30)
    return absl::InvalidArgumentError(
        cat("--request-timeout-s ", request_timeout_s, " must be 0 (none) or in (0, 2592000]"));
  if (!(progress_timeout_s >= 0) || progress_timeout_s > 86400 * 30)
    return absl::InvalidArgumentError(
        cat("--progress-timeout-s ", progress_timeout_s, " must be 0 (never) or in (0, 2592000]"));
  if (!(progress_interval_s >= 0.01) || progress_interval_s > 3600)
    return absl::InvalidArgumentError(
        cat("progress_interval_s ", progress_interval_s, " must be in [0.01, 3600]"));
  if (max_body_bytes < 1024 || max_body_bytes > (1u << 30))
    return absl::InvalidArgumentError("--max-body-bytes must be in [1024, 2^30]");
  if (http_threads < 2 || http_threads > 4096)
    return absl::InvalidArgumentError("--http-threads must be in [2, 4096]");
  // Every request waiting for admission holds a handler thread: with fewer
  // threads than the queue, requests would wait unseen instead of getting 429.
  if (http_threads <= max_queue)
    return absl::InvalidArgumentError(
        cat("--http-threads (", http_threads, ") must be more than --max-queue (", max_queue, ")"));
  if (http_io_threads < 1 || http_io_threads > 64)
    return absl::InvalidArgumentError("--http-io-threads must be in [1, 64]");
  if (max_header_bytes < 1024 || max_header_bytes > (16u << 20))
    return absl::InvalidArgumentError("--max-header-bytes must be in [1024, 2^24]");
  if (max_header_count < 8 || max_header_count > 10000)
    return absl::InvalidArgumentError("--max-header-count must be in [8, 10000]");
  if (max_connections < 1 || max_connections > 1000000)
    return absl::InvalidArgumentError("--max-connections must be in [1, 1000000]");
  for (auto [name, v] : {std::pair<const char*, double>{"--header-timeout-s", header_timeout_s},
                         {"--idle-timeout-s", idle_timeout_s},
                         {"--write-timeout-s", write_timeout_s}})
    if (!(v >= 0.05) || v > 86400)
      return absl::InvalidArgumentError(cat(name, " must be in [0.05, 86400]"));
  if (tls_cert.empty() != tls_key.empty())
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
  if (cors_origin.find_first_of("\r\n") != std::string::npos)
    return absl::InvalidArgumentError("--cors-origin must be one line");
  if (!(poll_seconds >= 0.05) || poll_seconds > 3600)
    return absl::InvalidArgumentError("--poll-seconds must be in [0.05, 3600]");
  K3_RETURN_IF_ERROR(base::parse_host_port(http_listen).status());
  if (tls_cert.empty() && !allow_plaintext)
    for (const std::string* a : {&http_listen, &grpc_listen})
      if (!is_loopback_address(*a))
        return absl::InvalidArgumentError(
            cat("refusing to serve plaintext on non-loopback address ", *a,
                ": give --tls-cert and --tls-key, or --allow-plaintext"));
  return absl::OkStatus();
}

std::string GatewayConfig::summary() const {
  std::string names;
  for (const std::string& n : served_model_names) names += cat(names.empty() ? "" : ",", n);
  return cat("model=", model_dir, " name=", names, " engined=", engined, " grpc=", grpc_listen,
             " http=", http_listen, " topology=", topology_file.empty() ? "(none)" : topology_file,
             " api_keys=", api_keys_file.empty() ? "off" : "on", " max_queue=", max_queue,
             " max_prompt_tokens=", max_prompt_tokens, " max_tokens_limit=", max_tokens_limit,
             " request_timeout_s=", request_timeout_s, " progress_timeout_s=", progress_timeout_s,
             " http_threads=", http_threads, " http_io_threads=", http_io_threads,
             " max_body_bytes=", max_body_bytes, " max_header_bytes=", max_header_bytes,
             " max_header_count=", max_header_count, " max_connections=", max_connections,
             " header_timeout_s=", header_timeout_s, " idle_timeout_s=", idle_timeout_s,
             " write_timeout_s=", write_timeout_s, " tls=", tls_cert.empty() ? "off" : "on",
             " cors_origin=", cors_origin.empty() ? "(none)" : cors_origin,
             " metrics_public=", metrics_public ? "yes" : "no", " web_ui=", web_ui ? "on" : "off",
             " strict_fields=", strict_fields ? "yes" : "no");
}

rpc::ServerOptions GatewayConfig::grpc_server_options() const {
  rpc::ServerOptions o;
  if (!tls_cert.empty()) o.tls = rpc::TlsFiles{tls_cert, tls_key, ""};
  return o;
}

}  // namespace k3::gateway
