// engined's configuration: one struct, from flags (and, for `serve`, a
// config file first: JSON, the flags' long names as keys,
// shared/base/config_file.h), resolved into the engine's options; `serve`
// logs it as one line at start. engined has three subcommands: score and
// generate (score_and_generate.h) and serve.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "engined/experts/source_factory.h"
#include "engined/model/model.h"
#include "engined/score_and_generate.h"
#include "engined/serving/engine_loop.h"
#include "shared/rpc/credentials.h"
#include "shared/status.h"

namespace k3::engined {

// Flags shared by score, generate and serve: the model and where its
// experts come from.
struct EngineFlags {
  std::string model_dir;
  std::vector<std::string> extra_dirs;
  int dense_bits = 0, mla_bits = 0, head_bits = 0;  // 0: not given (see resolve)
  std::string expert_kernel;                        // "" = int8, or float at --dense-bits 32
  int64_t chunk = 0;  // 0: not given (serve: the chunk policy; pieces of 32)
  float expert_top_p = 1.0f;
  std::string speculate = "auto";
  int sequence_groups = 2;
  int threads = 0;
  double expert_cache_gb = 1.0;
  int loader_threads = 4;
  bool no_direct = false;
  bool strict = false;
  bool mmap = false;
  std::vector<std::string> expertd;
  std::string manifest;
  bool verify_dense = false;
  std::vector<std::string> remote_expertd;
  rpc::TlsFiles tls;
  std::string auth_token_file;
  bool insecure_remote = false;
  int remote_deadline_ms = 10000;
  double remote_min_mbps = 50;
  std::string remote_mode = "compute";

  void add(CLI::App* cmd);
  // Bits not given follow a container's (k3container.json: what it was
  // repacked at), else the defaults above. Sets the OpenMP threads (--threads)
  // and loads the --manifest.
  StatusOr<engined::EngineOptions> resolve() const;
  // The expert source's options; `engine` from resolve() (its manifest).
  StatusOr<engined::ExpertSourceOptions> experts(const engined::EngineOptions& engine) const;
};

// `engined serve`: the model behind the control API, sessions and checkpoints.
struct ServeFlags {
  std::string listen = "unix:/run/k3serve/engined.sock";
  int sessions = 4;
  double checkpoint_mb = 0;
  std::string checkpoint_dir;
  double checkpoint_disk_gb = 32;
  int64_t snapshot_tokens = 256;
  int64_t max_context = 131072;
  void add(CLI::App* cmd);
  // INVALID_ARGUMENT naming the flag: --checkpoint-disk-gb without
  // --checkpoint-dir, --snapshot-tokens with no checkpoint tier to keep them.
  Status validate() const;
  // The engine loop's sessions and checkpoints (its expert source: EngineFlags).
  engined::EngineLoopOptions loop_options() const;
};

struct Config {
  std::string log_level = "info";
  // --log-format: text or json (shared/base/log_format.h)
  std::string log_format = "text";
  std::string config_file;  // serve --config: read before parsing (shared/base/config_file.h)
  // Each subcommand's flags; the one given is the one parsed.
  EngineFlags score_flags;
  engined::ScoreJob score_job;
  EngineFlags generate_flags;
  engined::GenerateJob generate_job;
  EngineFlags serve_flags;
  ServeFlags serve_only;
  CLI::App* score = nullptr;
  CLI::App* generate = nullptr;
  CLI::App* serve = nullptr;

  // Registers --log-level and the three subcommands with their flags on `app`.
  void add_flags(CLI::App& app);
  // Where a config file's flags go: right after the subcommand.
  static size_t config_insert_position(int argc, char** argv);
  // The flags without a value (`true` in a config file adds them).
  static std::vector<std::string> switches();
  // score or generate: resolves the chosen job's engine and expert options.
  Status validate_job();
  // serve's one line at start; `engine` from serve_flags.resolve().
  std::string serve_summary(const engined::EngineOptions& engine) const;
};

}  // namespace k3::engined
