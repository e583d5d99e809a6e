// gateway: the public front door. This stage serves gRPC Health only.
#include <CLI/CLI.hpp>

#include "gateway/health_service.h"
#include "shared/log.h"
#include "shared/rpc/server.h"

int main(int argc, char** argv) {
  k3::rpc::block_shutdown_signals();
  CLI::App app{"gateway: public gRPC front door of k3serve"};
  std::string listen = "127.0.0.1:50051", level = "info";
  app.add_option("--grpc-listen", listen, "gRPC address (HOST:PORT; port 0 picks a free one)");
  app.add_option("--log-level", level, "trace, debug, info, warn, error");
  CLI11_PARSE(app, argc, argv);
  auto log = k3::logger("gateway");
  if (!k3::set_log_level(level)) {
    log->error("unknown --log-level '{}'", level);
    return 2;
  }
  k3::gateway::GatewayServiceImpl service;
  log->info("gRPC Health only at this stage");
  return k3::rpc::serve_until_signal(listen, {&service}, "gateway");
}
