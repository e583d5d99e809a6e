// engined: the dense stack of K3.
// This stage: `engined serve` validates the checkpoint and answers Health on its
// control socket. Scoring and generation arrive with the engine issue.
#include <CLI/CLI.hpp>

#include "engined/health_service.h"
#include "shared/checkpoint.h"
#include "shared/log.h"
#include "shared/rpc/server.h"

int main(int argc, char** argv) {
  k3::rpc::block_shutdown_signals();
  CLI::App app{"engined: the K3 compute daemon"};
  app.require_subcommand(1);
  std::string model_dir, listen = "unix:/run/k3serve/engined.sock", level = "info";
  auto* serve = app.add_subcommand("serve", "validate the model and serve the control API");
  serve->add_option("--model", model_dir, "model directory")->required();
  serve->add_option("--listen", listen, "control service address (unix:PATH or HOST:PORT)");
  app.add_option("--log-level", level, "trace, debug, info, warn, error");
  CLI11_PARSE(app, argc, argv);
  auto log = k3::logger("engined");
  if (!k3::set_log_level(level)) {
    log->error("unknown --log-level '{}'", level);
    return 2;
  }
  auto config = k3::load_model_config(model_dir);
  if (!config.ok()) {
    log->error("{}", config.status().message());
    return 1;
  }
  auto ck = k3::Checkpoint::open(model_dir);
  if (!ck.ok()) {
    log->error("{}", ck.status().message());
    return 1;
  }
  if (auto s = k3::validate_checkpoint(**ck, *config); !s.ok()) {
    log->error("{}", s.message());
    return 1;
  }
  log->info("model ok: {}", config->summary());
  k3::engined::EngineServiceImpl service;
  auto server = k3::rpc::start_server(listen, {&service});
  if (!server.ok()) {
    log->error("{}", server.status().message());
    return 1;
  }
  log->info("listening on {}", server->address);
  int sig = k3::rpc::wait_for_shutdown_signal();
  log->info("signal {}: shutting down", sig);
  server->server->Shutdown();
  return 0;
}
