// expertd: owns shard files and serves their routed experts to local engined
// processes through a shared-memory LRU filled by io_uring reads.
#include <optional>

#include <CLI/CLI.hpp>

#include "expertd/config.h"
#include "expertd/control_service.h"
#include "expertd/remote_listener.h"
#include "expertd/segment_server.h"
#include "shared/base/cli_help.h"
#include "shared/base/config_file.h"
#include "shared/base/cpu_features.h"
#include "shared/base/log.h"
#include "shared/base/log_format.h"
#include "shared/base/malloc_policy.h"
#include "shared/base/start_progress.h"
#include "shared/base/version.h"
#include "shared/checkpoint/manifest.h"
#include "shared/rpc/server.h"

int main(int argc, char** argv) {
  k3::base::exit_if_kernel_isa_invalid("expertd");  // a bad K3_KERNELS refuses to start
  k3::base::keep_freed_memory_for_reuse();          // malloc_policy.h
  k3::rpc::block_shutdown_signals();
  CLI::App app{"expertd: routed-expert server for k3serve"};
  k3::base::use_k3_help_format(app);  // defaults and units on every --help line
  app.set_version_flag("--version", k3::base::version_line("expertd"),
                       "print the version and the git commit it was built from, then exit");
  k3::expertd::Config cfg;
  cfg.add_flags(app);
  const std::vector<std::string> switches = {"no-direct", "insecure-remote"};
  K3_PARSE_WITH_CONFIG(app, argc, argv, 1, switches, app);
  k3::base::set_log_format(*k3::base::parse_log_format(cfg.log_format), "expertd");
  auto log = k3::base::logger("expertd");
  if (!k3::base::set_log_level(cfg.log_level)) {
    log->error("unknown --log-level '{}'", cfg.log_level);
    return 2;
  }
  if (auto s = cfg.validate(); !s.ok()) {
    log->error("{}", s.message());
    return 2;
  }
  log->info("config: {}", cfg.summary());
  // systemd (Type=notify) hears what the start does, and that it needs
  // longer while it progresses (a large segment filled on a slow machine).
  std::optional<k3::base::StartProgress> start(std::in_place,
                                               k3::cat("indexing the shards of ", cfg.model_dir));
  auto shards = k3::expertd::ShardSet::open(cfg.model_dir, cfg.shard_dirs);
  if (!shards.ok()) {
    log->error("{}", shards.status().message());
    return 1;
  }
  for (const std::string& w : (*shards)->checkpoint().missing_shard_warnings()) log->warn("{}", w);
  const auto& mc = (*shards)->config();
  log->info("indexed {} experts ({} stored contiguously: one read each); {}",
            mc.num_moe_layers() * mc.num_experts, (*shards)->index().contiguous_count(),
            mc.summary());
  std::optional<k3::checkpoint::Manifest> manifest;
  if (!cfg.manifest_file.empty()) {
    auto m = k3::checkpoint::Manifest::load(cfg.manifest_file);
    if (!m.ok()) {
      log->error("{}", m.status().message());
      return 1;
    }
    if (m->header().fingerprint != (*shards)->checkpoint().fingerprint()) {
      log->error("{} is the manifest of another model (its fingerprint differs from {}'s)",
                 cfg.manifest_file, cfg.model_dir);
      return 1;
    }
    manifest = std::move(*m);
    cfg.server.manifest = &*manifest;
    log->info("verifying every expert read against {} ({} entries)", cfg.manifest_file,
              manifest->entries().size());
  }
  // The control socket first (it refuses a live twin), then the segment.
  if (auto s = k3::rpc::prepare_listen_address(cfg.listen); !s.ok()) {
    log->error("{}", s.message());
    return 1;
  }
  start->phase("creating the shared-memory segment");
  auto data = k3::expertd::SegmentServer::start(**shards, cfg.server);
  if (!data.ok()) {
    log->error("{}", data.status().message());
    return 1;
  }
  k3::expertd::ControlService service(**shards, data->get());
  std::unique_ptr<k3::expertd::RemoteListener> remote;
  if (!cfg.remote.listen.empty()) {
    auto r = k3::expertd::RemoteListener::start(**shards, **data, service, cfg.remote);
    if (!r.ok()) {
      log->error("{}", r.status().message());
      return 1;
    }
    remote = std::move(*r);
    service.set_remote(remote.get());
    if (cfg.remote.insecure)
      log->warn(
          "remote listener on {} is PLAINTEXT (--insecure-remote): activations and the "
          "token travel unencrypted; use --tls-cert/--tls-key outside tests",
          remote->address());
    log->info("remote listener on {} ({}{})", remote->address(),
              cfg.remote.insecure         ? "plaintext"
              : cfg.remote.tls.ca.empty() ? "TLS"
                                          : "mutual TLS",
              cfg.remote.token.empty() ? ", no token" : ", token required");
  }
  start.reset();  // serve_until_signal says READY=1 once the API answers
  const int rc = k3::rpc::serve_until_signal(cfg.listen, {&service}, "expertd");
  if (remote) remote->stop();
  (*data)->stop();
  return rc;
}
