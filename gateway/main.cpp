// gateway: the public front door of k3serve: the gRPC API and the OpenAI HTTP
// API, admission and sequencing of requests into engined, and the expertd
// topology. main() only wires the parts together.
#include <cstdio>
#include <filesystem>
#include <fstream>

#include <CLI/CLI.hpp>

#include "gateway/core/config.h"
#include "gateway/core/gateway_core.h"
#include "gateway/grpc/grpc_api.h"
#include "gateway/http/http_api.h"
#include "shared/base/cli_help.h"
#include "shared/base/config_file.h"
#include "shared/base/cpu_features.h"
#include "shared/base/log.h"
#include "shared/base/log_format.h"
#include "shared/base/service_notify.h"
#include "shared/base/version.h"
#include "shared/rpc/server.h"

namespace {

// Atomically (write, then rename) so a watcher never reads half a line.
bool write_ready_file(const std::string& path, const std::string& line) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::trunc);
    if (!(f << line << "\n")) return false;
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  return !ec;
}

}  // namespace

int main(int argc, char** argv) {
  k3::base::exit_if_kernel_isa_invalid("gateway");  // a bad K3_KERNELS refuses to start
  k3::rpc::block_shutdown_signals();
  CLI::App app{"gateway: the public front door of k3serve (gRPC and OpenAI HTTP APIs)"};
  k3::base::use_k3_help_format(app);  // defaults and units on every --help line
  app.set_version_flag("--version", k3::base::version_line("gateway"),
                       "print the version and the git commit it was built from, then exit");
  k3::gateway::GatewayConfig config;
  config.add_flags(app);
  // The flags without a value: `true` in a config file adds them.
  K3_PARSE_WITH_CONFIG(
      app, argc, argv, 1,
      std::vector<std::string>({"allow-plaintext", "metrics-public", "no-web-ui", "strict-fields"}),
      app);
  k3::base::set_log_format(*k3::base::parse_log_format(config.log_format), "gateway");
  auto log = k3::base::logger("gateway");
  if (!k3::base::set_log_level(config.log_level)) {
    log->error("unknown --log-level '{}'", config.log_level);
    return 2;
  }
  if (auto s = config.validate(); !s.ok()) {
    log->error("{}", s.message());
    return 2;
  }
  log->info("config: {}", config.summary());
  auto core = k3::gateway::GatewayCore::create(config);
  if (!core.ok()) {
    log->error("{}", core.status().message());
    return 1;
  }
  k3::gateway::GrpcApi grpc_api(core->get());
  k3::rpc::ServerOptions grpc_options = config.grpc_server_options();
  grpc_options.gate = grpc_api.token_gate();
  auto grpc_server = k3::rpc::start_server(config.grpc_listen, {&grpc_api}, grpc_options);
  if (!grpc_server.ok()) {
    log->error("{}", grpc_server.status().message());
    return 1;
  }
  k3::gateway::HttpApi http((*core).get());
  auto http_addr = http.start(config.http_listen);
  if (!http_addr.ok()) {
    log->error("{}", http_addr.status().message());
    grpc_server->server->Shutdown();
    return 1;
  }
  const std::string ready = k3::cat("http=", *http_addr, " grpc=", grpc_server->address);
  log->info("listening {}", ready);
  if (!config.ready_file.empty() && !write_ready_file(config.ready_file, ready)) {
    log->error("cannot write --ready-file {}", config.ready_file);
    return 1;
  }
  // Type=notify: the unit is started once both APIs answer.
  if (auto s = k3::base::notify_ready(k3::cat("serving ", ready)); !s.ok())
    log->warn("{}", k3::msg(s));
  const int sig = k3::rpc::wait_for_shutdown_signal();
  log->info("signal {}: stopping", sig);
  (void)k3::base::notify_stopping();
  // Running requests end first (their streams get an error), then the servers.
  (*core)->generator().stop();
  grpc_server->server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  http.stop();
  return 0;
}
