// engined: the dense stack of K3.
//   engined score    teacher-forced logits of a prompt (validation contract)
//   engined generate generate from a prompt of token ids
//   engined serve    serve requests: sessions, checkpoints, the control API
// main() only wires the parts together (the flags: config.h).
#include <optional>

#include <CLI/CLI.hpp>

#include "engined/config.h"
#include "engined/engine_service.h"
#include "engined/score_and_generate.h"
#include "shared/base/cli_help.h"
#include "shared/base/config_file.h"
#include "shared/base/cpu_features.h"
#include "shared/base/log.h"
#include "shared/base/log_format.h"
#include "shared/base/malloc_policy.h"
#include "shared/base/start_progress.h"
#include "shared/base/version.h"
#include "shared/checkpoint/stop_tokens.h"
#include "shared/rpc/server.h"
#include "shared/tokenizer/tokenizer.h"

namespace {

// `engined serve`: the model behind the control API, sessions and checkpoints.
int serve(const k3::engined::Config& cfg) {
  const k3::engined::EngineFlags& flags = cfg.serve_flags;
  const k3::engined::ServeFlags& sf = cfg.serve_only;
  auto log = k3::base::logger("engined");
  if (auto v = sf.validate(); !v.ok()) {
    log->error("{}", v.message());
    return 1;
  }
  auto resolved = flags.resolve();
  if (!resolved.ok()) {
    log->error("{}", resolved.status().message());
    return 1;
  }
  k3::engined::EngineOptions opt = *resolved;
  opt.max_context = sf.max_context;
  log->info("{}", cfg.serve_summary(opt));
  // systemd (Type=notify) hears what the start does and, while the load
  // progresses, that it needs longer than the unit's start timeout.
  std::optional<k3::base::StartProgress> start(std::in_place, "checking the listen address");
  // Refuse a listen address another engined answers on before the long load.
  if (auto s = k3::rpc::prepare_listen_address(sf.listen); !s.ok()) {
    log->error("{}", s.message());
    return 1;
  }
  // The tokenizer and the stop tokens, before the long load too.
  start->phase(k3::cat("loading the tokenizer from ", flags.model_dir));
  auto tok = k3::tokenizer::Tokenizer::load(flags.model_dir);
  if (!tok.ok())
    log->warn(
        "no tokenizer in {} ({}): repetition_penalty applies to control tokens too, and only "
        "the config files' eos ids stop generation",
        flags.model_dir, tok.status().message());
  auto stops = k3::checkpoint::load_stop_tokens(flags.model_dir, tok.ok() ? &*tok : nullptr);
  if (!stops.ok()) {
    log->error("{}", stops.status().message());
    return 1;
  }
  log->info("stop tokens: {}", stops->summary());
  start->phase(k3::cat("loading the model from ", flags.model_dir));
  auto model = k3::engined::Model::load(flags.model_dir, flags.extra_dirs, opt);
  if (!model.ok()) {
    log->error("{}", model.status().message());
    return 1;
  }
  log->info("model ok: {}", (*model)->config().summary());
  k3::engined::EngineLoopOptions lo = sf.loop_options();
  auto experts = flags.experts(opt);
  if (!experts.ok()) {
    log->error("{}", experts.status().message());
    return 2;
  }
  lo.experts = *experts;
  lo.chunk_policy = flags.chunk == 0;  // --chunk given: every piece that size
  // The control tokens, which repetition_penalty leaves alone.
  if (tok.ok())
    for (int32_t id = tok->num_ranks(); id < tok->vocab_size(); ++id) lo.unpenalized_ids.insert(id);
  lo.stop_ids = stops->ids;
  start->phase("starting the engine");
  auto loop = k3::engined::EngineLoop::create(std::move(*model), lo);
  if (!loop.ok()) {
    log->error("{}", loop.status().message());
    return 1;
  }
  k3::engined::EngineServiceImpl service(loop->get(),
                                         k3::engined::ConstraintCompiler::load(flags.model_dir));
  start.reset();  // serve_until_signal says READY=1 once the API answers
  return k3::rpc::serve_until_signal(sf.listen, {&service}, "engined");
}

}  // namespace

int main(int argc, char** argv) {
  k3::base::exit_if_kernel_isa_invalid("engined");  // a bad K3_KERNELS refuses to start
  k3::base::keep_freed_memory_for_reuse();          // malloc_policy.h
  CLI::App app{"engined: the K3 compute daemon"};
  k3::base::use_k3_help_format(app);  // defaults and units on every --help line
  app.set_version_flag("--version", k3::base::version_line("engined"),
                       "print the version and the git commit it was built from, then exit");
  app.require_subcommand(1);
  app.fallthrough();
  k3::engined::Config cfg;
  cfg.add_flags(app);
  // A config file's flags go right after the subcommand.
  K3_PARSE_WITH_CONFIG(app, argc, argv, k3::engined::Config::config_insert_position(argc, argv),
                       k3::engined::Config::switches(), *cfg.serve);
  k3::base::set_log_format(*k3::base::parse_log_format(cfg.log_format), "engined");
  auto log = k3::base::logger("engined");
  if (!k3::base::set_log_level(cfg.log_level)) {
    log->error("unknown --log-level '{}'", cfg.log_level);
    return 2;
  }
  if (*cfg.serve) {
    // serve waits for SIGINT/SIGTERM with sigwait(), so they are blocked
    // before any thread starts (threads inherit the mask); score and generate
    // keep the default action: the signal ends them (exit 130/143).
    k3::rpc::block_shutdown_signals();
    return serve(cfg);
  }
  k3::Status st = cfg.validate_job();
  if (st.ok())
    st = *cfg.score ? k3::engined::run_score(cfg.score_job)
                    : k3::engined::run_generate(cfg.generate_job);
  if (!st.ok()) {
    log->error("{}", st.message());
    return 1;
  }
  return 0;
}
