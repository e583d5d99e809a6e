#include "gateway/core/config.h"

#include <filesystem>

namespace k3::gateway {

void GatewayConfig::add_flags(CLI::App& app) {
  app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  app.add_option("--config", config_file,
                 "config file: JSON object of flag names to values; flags given here override it");
  app.add_option("--model", model_dir, "model directory (tokenizer, config.json)")->required();
  app.add_option("--model-name", model_name, "model id served (default: the directory's name)");
  app.add_option("--engined", engined, "engined control address (unix:PATH or HOST:PORT)");
  app.add_option("--grpc-listen", grpc_listen, "gRPC API address (HOST:PORT; port 0 = any)");
  app.add_option("--http-listen", http_listen, "OpenAI HTTP API address (HOST:PORT; port 0 = any)");
  app.add_option("--topology", topology_file, "expertd topology file (JSON)");
  app.add_option("--api-keys", api_keys_file, "API keys file (one per line); enables auth");
  app.add_option("--ready-file", ready_file, "write 'http=HOST:PORT grpc=HOST:PORT' here when up");
  app.add_option("--max-queue", max_queue, "requests that may wait for a session (then 429)");
  app.add_option("--max-prompt-tokens", max_prompt_tokens, "longest prompt accepted (0 = context)");
  app.add_option("--request-timeout-s", request_timeout_s, "per-request deadline in seconds");
  app.add_option("--max-body-bytes", max_body_bytes, "largest HTTP request body");
  app.add_option("--http-threads", http_threads, "HTTP worker threads");
  app.add_option("--poll-seconds", poll_seconds, "topology and health poll period");
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
}

StatusOr<std::pair<std::string, int>> split_host_port(const std::string& a) {
  const size_t colon = a.rfind(':');
  if (colon == std::string::npos || colon == 0 || colon + 1 == a.size())
    return absl::InvalidArgumentError(cat("'", a, "' is not HOST:PORT"));
  std::string host = a.substr(0, colon);
  if (host.size() > 2 && host.front() == '[' && host.back() == ']')
    host = host.substr(1, host.size() - 2);
  int port = -1;
  try {
    size_t used = 0;
    port = std::stoi(a.substr(colon + 1), &used);
    if (used != a.size() - colon - 1) port = -1;
  } catch (...) {
    port = -1;
  }
  if (port < 0 || port > 65535)
    return absl::InvalidArgumentError(cat("'", a, "': port must be 0..65535"));
  return std::make_pair(host, port);
}

Status GatewayConfig::validate() {
  if (model_name.empty())
    model_name = std::filesystem::path(model_dir).lexically_normal().filename().string();
  if (model_name.empty()) model_name = "k3";
  if (max_queue < 0 || max_queue > 100000)
    return absl::InvalidArgumentError(cat("--max-queue ", max_queue, " is outside [0, 100000]"));
  if (max_prompt_tokens < 0) return absl::InvalidArgumentError("--max-prompt-tokens must be >= 0");
  if (!(request_timeout_s > 0) || request_timeout_s > 86400)
    return absl::InvalidArgumentError("--request-timeout-s must be in (0, 86400]");
  if (max_body_bytes < 1024 || max_body_bytes > (1u << 30))
    return absl::InvalidArgumentError("--max-body-bytes must be in [1024, 2^30]");
  if (http_threads < 2 || http_threads > 4096)
    return absl::InvalidArgumentError("--http-threads must be in [2, 4096]");
  if (!(poll_seconds >= 0.05) || poll_seconds > 3600)
    return absl::InvalidArgumentError("--poll-seconds must be in [0.05, 3600]");
  K3_RETURN_IF_ERROR(split_host_port(http_listen).status());
  return absl::OkStatus();
}

std::string GatewayConfig::summary() const {
  return cat("model=", model_dir, " name=", model_name, " engined=", engined, " grpc=", grpc_listen,
             " http=", http_listen, " topology=", topology_file.empty() ? "(none)" : topology_file,
             " api_keys=", api_keys_file.empty() ? "off" : "on", " max_queue=", max_queue,
             " max_prompt_tokens=", max_prompt_tokens, " timeout_s=", request_timeout_s,
             " http_threads=", http_threads);
}

}  // namespace k3::gateway
