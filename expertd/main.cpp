// expertd: owns shard files and serves their routed experts.
// This stage: indexes the experts of its shards (refusing a bad checkpoint at
// start) and answers Health and Describe on its control socket.
#include <CLI/CLI.hpp>

#include "expertd/expert_service.h"
#include "shared/log.h"
#include "shared/rpc/server.h"

int main(int argc, char** argv) {
  k3::rpc::block_shutdown_signals();
  CLI::App app{"expertd: routed-expert server for k3serve"};
  std::string model_dir, listen = "unix:/run/k3serve/expertd.sock", level = "info";
  std::vector<std::string> extra_dirs;
  app.add_option("--model", model_dir, "model directory (config.json, index)")->required();
  app.add_option("--shard-dir", extra_dirs, "extra shard directory (repeatable)");
  app.add_option("--listen", listen, "control service address (unix:PATH or HOST:PORT)");
  app.add_option("--log-level", level, "trace, debug, info, warn, error");
  CLI11_PARSE(app, argc, argv);
  auto log = k3::logger("expertd");
  if (!k3::set_log_level(level)) {
    log->error("unknown --log-level '{}'", level);
    return 2;
  }
  log->info("config: model={} shard_dirs={} listen={}", model_dir, extra_dirs.size(), listen);
  auto shards = k3::expertd::ShardSet::open(model_dir, extra_dirs);
  if (!shards.ok()) {
    log->error("{}", shards.status().message());
    return 1;
  }
  const auto& cfg = (*shards)->config();
  log->info("indexed {} experts ({} stored contiguously: one read each); {}",
            cfg.num_moe_layers() * cfg.num_experts, (*shards)->index().contiguous_count(),
            cfg.summary());
  k3::expertd::ExpertServiceImpl service(**shards);
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
