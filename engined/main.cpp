// engined: the dense stack of K3.
//   engined score    teacher-forced logits of a prompt (validation contract)
//   engined generate generate from a prompt of token ids
//   engined serve    serve requests: sessions, checkpoints, the control API
#include <omp.h>

#include <CLI/CLI.hpp>
#include <cstring>

#include "engined/engine_service.h"
#include "engined/score_and_generate.h"
#include "shared/base/cli_help.h"
#include "shared/base/config_file.h"
#include "shared/base/cpu_features.h"
#include "shared/base/log.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/container.h"
#include "shared/rpc/server.h"
#include "shared/tokenizer/tokenizer.h"

namespace {

// Flags shared by score and generate.
struct EngineFlags {
  std::string model_dir;
  std::vector<std::string> extra_dirs;
  int dense_bits = 0, mla_bits = 0, head_bits = 0;  // 0: not given (see resolve)
  std::string expert_kernel;                        // "" = int8, or float at --dense-bits 32
  int64_t chunk = 32;
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
  k3::rpc::TlsFiles tls;
  std::string auth_token_file;
  bool insecure_remote = false;
  int remote_deadline_ms = 10000;
  std::string remote_mode = "compute";

  void add(CLI::App* cmd) {
    cmd->add_option("--model", model_dir, "model directory")->required();
    cmd->add_option("--shard-dir", extra_dirs, "extra shard directory (repeatable)");
    cmd->add_option("--dense-bits", dense_bits,
                    "KDA/FFN/latent/shared matrices: 32, 8 or 4 (default 4; a container's own)")
        ->check(CLI::IsMember({4, 8, 32}));
    cmd->add_option("--mla-bits", mla_bits,
                    "MLA projections: 32, 8 or 4 (default 8; 32 with --dense-bits 32; a "
                    "container's own)")
        ->check(CLI::IsMember({4, 8, 32}));
    cmd->add_option("--head-bits", head_bits,
                    "lm_head: 32, 8 or 4 (default 8; 32 with --dense-bits 32; a container's own)")
        ->check(CLI::IsMember({4, 8, 32}));
    cmd->add_flag("--strict", strict,
                  "refuse a checkpoint holding tensors the model does not use (default: warn)");
    cmd->add_flag("--mmap", mmap,
                  "map a container's prepared matrices read-only instead of copying them "
                  "(shared between processes; refused where a matrix would need conversion)");
    cmd->add_option("--expert-kernel", expert_kernel,
                    "float | int8 (default int8; float with --dense-bits 32)")
        ->check(CLI::IsMember({"float", "int8"}));
    cmd->add_option("--chunk", chunk, "prefill chunk in tokens (1 = token at a time)")
        ->check(CLI::Range(1, 4096));
    cmd->add_option("--expert-top-p", expert_top_p,
                    "routed-expert pruning: per token, keep experts in descending gate weight "
                    "until their cumulative weight reaches P, renormalised (1 = off, the default)")
        ->check(CLI::Range(0.0f, 1.0f))
        ->check([](const std::string& v) {
          return std::stod(v) > 0.0 ? std::string() : std::string("--expert-top-p must be > 0");
        });
    cmd->add_option("--speculate", speculate,
                    "speculative reads of the next layer's predicted experts: auto (on while "
                    "they pay, the default), on, off")
        ->check(CLI::IsMember({"auto", "on", "off"}));
    cmd->add_option("--sequence-groups", sequence_groups,
                    "with two or more sequences running: 2 splits them into two groups offset "
                    "by half a layer (one group's attention runs while the other's experts are "
                    "read), 1 runs them as one")
        ->check(CLI::IsMember({1, 2}));
    cmd->add_option("--threads", threads, "compute threads (default: all cores)");
    cmd->add_option("--expert-cache-gb", expert_cache_gb, "routed-expert LRU budget in GB");
    cmd->add_option("--loader-threads", loader_threads, "expert read threads")
        ->check(CLI::Range(1, 64));
    cmd->add_flag("--no-direct", no_direct, "buffered expert reads instead of O_DIRECT");
    cmd->add_option("--manifest", manifest,
                    "integrity manifest (k3ctl manifest): dense tensors are checked at load (with "
                    "--mmap only with --verify-dense) and every expert read in-process is checked "
                    "(default: none)");
    cmd->add_flag("--verify-dense", verify_dense,
                  "with --manifest and --mmap: check the mapped dense tensors at load (reads "
                  "every mapped byte)");
    cmd->add_option("--expertd", expertd,
                    "take experts from this expertd shared-memory segment: NAME (/dev/shm) or "
                    "DIR/NAME (expertd --segment-dir DIR) (repeatable; default: read the shards "
                    "in-process)");
    cmd->add_option("--remote-expertd", remote_expertd,
                    "take experts from the remote expertd at NAME=HOST:PORT (repeatable; its "
                    "--remote-listen); no shard is then read in-process");
    cmd->add_option("--tls-ca", tls.ca, "PEM CA the remote expertd certificates are signed by");
    cmd->add_option("--tls-cert", tls.cert, "PEM client certificate (mutual TLS)");
    cmd->add_option("--tls-key", tls.key, "PEM private key of --tls-cert");
    cmd->add_option("--auth-token-file", auth_token_file,
                    "file holding the token the remote expertd require (mode 0600)");
    cmd->add_flag("--insecure-remote", insecure_remote,
                  "plaintext to the remote expertd (no TLS); for tests and trusted links only");
    cmd->add_option("--remote-deadline-ms", remote_deadline_ms,
                    "deadline of every remote call: a host silent this long is given up "
                    "(its work re-issued on a replica)")
        ->check(CLI::Range(1, 600000));
    cmd->add_option("--remote-mode", remote_mode,
                    "compute (the hosts compute the rows, default) | bytes (they send the "
                    "experts' bytes, computed here)")
        ->check(CLI::IsMember({"compute", "bytes"}));
  }

  // Bits not given follow a container's (k3container.json: what it was
  // repacked at), else the defaults above.
  k3::StatusOr<k3::engine::EngineOptions> resolve() const {
    K3_ASSIGN_OR_RETURN(std::optional<k3::ContainerInfo> container,
                        k3::read_container_info(model_dir));
    k3::engine::EngineOptions o;
    if (container && dense_bits == 0) {
      o.quant.dense_bits = container->dense_bits;
      o.quant.mla_bits = mla_bits ? mla_bits : container->mla_bits;
      o.quant.head_bits = head_bits ? head_bits : container->head_bits;
    } else {
      const int dense = dense_bits ? dense_bits : 4;
      o.quant.dense_bits = dense;
      o.quant.mla_bits = mla_bits ? mla_bits : (dense == 32 ? 32 : 8);
      o.quant.head_bits = head_bits ? head_bits : (dense == 32 ? 32 : 8);
    }
    o.quant.strict = strict;
    o.quant.mmap = mmap;
    o.int8_experts = expert_kernel.empty() ? o.quant.dense_bits != 32 : expert_kernel == "int8";
    o.chunk = chunk;
    o.expert_top_p = expert_top_p;
    o.speculation = speculate == "on"    ? k3::engine::SpeculationMode::kOn
                    : speculate == "off" ? k3::engine::SpeculationMode::kOff
                                         : k3::engine::SpeculationMode::kAuto;
    o.sequence_groups = sequence_groups;
    if (threads > 0) omp_set_num_threads(threads);
    if (verify_dense && manifest.empty())
      return absl::InvalidArgumentError("--verify-dense needs --manifest FILE");
    if (!manifest.empty()) {
      K3_ASSIGN_OR_RETURN(k3::Manifest m, k3::Manifest::load(manifest));
      o.manifest = std::make_shared<const k3::Manifest>(std::move(m));
      o.verify_dense = verify_dense;
    }
    return o;
  }

  // The expert source's options; `engine` from resolve() (its manifest).
  k3::StatusOr<k3::engine::ExpertSourceOptions> experts(
      const k3::engine::EngineOptions& engine) const {
    k3::engine::ExpertSourceOptions o;
    o.manifest = engine.manifest;
    o.cache_bytes = static_cast<uint64_t>(std::max(0.0, expert_cache_gb) * 1e9);
    o.loader_threads = loader_threads;
    o.direct_io = !no_direct;
    o.expertd_segments = expertd;
    o.remote_tls = tls;
    o.remote_token_file = auth_token_file;
    o.insecure_remote = insecure_remote;
    o.remote_deadline_ms = remote_deadline_ms;
    o.remote_bytes = remote_mode == "bytes";
    K3_RETURN_IF_ERROR(k3::engine::parse_remote_flags(remote_expertd, &o));
    if (insecure_remote)
      k3::logger("engined")->warn(
          "--insecure-remote: activations and the token travel to the remote expertd "
          "unencrypted");
    return o;
  }
};

// `engined serve`: the model behind the control API, sessions and checkpoints.
struct ServeFlags {
  std::string listen = "unix:/run/k3serve/engined.sock";
  int sessions = 4;
  double checkpoint_mb = 0;
  std::string checkpoint_dir;
  int64_t max_context = 131072;

  void add(CLI::App* cmd) {
    cmd->add_option("--listen", listen, "control service address (unix:PATH or HOST:PORT)");
    cmd->add_option("--sessions", sessions, "decode sessions kept (each holds a sequence state)")
        ->check(CLI::Range(1, 1024));
    cmd->add_option("--checkpoint-mb", checkpoint_mb,
                    "budget for saved sequence states at turn boundaries (0 = off)")
        ->check(CLI::Range(0.0, 1e9));
    cmd->add_option("--checkpoint-dir", checkpoint_dir,
                    "keep checkpoints in files here instead of RAM");
    cmd->add_option("--max-context", max_context, "tokens a session may hold")
        ->check(CLI::Range(int64_t{16}, int64_t{1} << 24));
  }
};

int serve(const EngineFlags& flags, const ServeFlags& sf) {
  auto log = k3::logger("engined");
  auto resolved = flags.resolve();
  if (!resolved.ok()) {
    log->error("{}", resolved.status().message());
    return 1;
  }
  k3::engine::EngineOptions opt = *resolved;
  opt.max_context = sf.max_context;
  log->info(
      "serve: model={} listen={} sessions={} checkpoint_mb={} checkpoint_dir={} "
      "max_context={} expertd=[{}] remote_expertd=[{}] dense_bits={} chunk={} manifest={}",
      flags.model_dir, sf.listen, sf.sessions, sf.checkpoint_mb,
      sf.checkpoint_dir.empty() ? "(RAM)" : sf.checkpoint_dir, sf.max_context,
      fmt::join(flags.expertd, ","), fmt::join(flags.remote_expertd, ","), opt.quant.dense_bits,
      flags.chunk, flags.manifest.empty() ? "none" : flags.manifest);
  // Refuse a listen address another engined answers on before the long load.
  if (auto s = k3::rpc::prepare_listen_address(sf.listen); !s.ok()) {
    log->error("{}", s.message());
    return 1;
  }
  auto model = k3::engine::Model::load(flags.model_dir, flags.extra_dirs, opt);
  if (!model.ok()) {
    log->error("{}", model.status().message());
    return 1;
  }
  log->info("model ok: {}", (*model)->config().summary());
  k3::engine::EngineLoopOptions lo;
  lo.sessions = sf.sessions;
  lo.checkpoints.budget_bytes = static_cast<uint64_t>(sf.checkpoint_mb * 1e6);
  lo.checkpoints.dir = sf.checkpoint_dir;
  auto experts = flags.experts(opt);
  if (!experts.ok()) {
    log->error("{}", experts.status().message());
    return 2;
  }
  lo.experts = *experts;
  // The control tokens, which repetition_penalty leaves alone.
  if (auto tok = k3::tokenizer::Tokenizer::load(flags.model_dir); tok.ok()) {
    for (int32_t id = tok->num_ranks(); id < tok->vocab_size(); ++id) lo.unpenalized_ids.insert(id);
  } else {
    log->warn("no tokenizer in {} ({}): repetition_penalty applies to control tokens too",
              flags.model_dir, tok.status().message());
  }
  auto loop = k3::engine::EngineLoop::create(std::move(*model), lo);
  if (!loop.ok()) {
    log->error("{}", loop.status().message());
    return 1;
  }
  k3::engined::EngineServiceImpl service(loop->get(),
                                         k3::engine::ConstraintCompiler::load(flags.model_dir));
  return k3::rpc::serve_until_signal(sf.listen, {&service}, "engined");
}

}  // namespace

int main(int argc, char** argv) {
  k3::exit_if_kernel_isa_invalid("engined");  // a bad K3_KERNELS refuses to start
  k3::rpc::block_shutdown_signals();
  CLI::App app{"engined: the K3 compute daemon"};
  k3::use_k3_help_format(app);  // defaults and units on every --help line
  app.require_subcommand(1);
  app.fallthrough();
  std::string level = "info";
  app.add_option("--log-level", level, "trace, debug, info, warn, error");

  EngineFlags score_flags;
  k3::engine::ScoreJob score_job;
  auto* score =
      app.add_subcommand("score", "teacher-forced logits of every position (f32 [T, vocab])");
  score_flags.add(score);
  score->add_option("--ids", score_job.ids, "prompt token ids, comma-separated")->required();
  score->add_option("--out", score_job.out, "output file (little-endian f32 [T, vocab])")
      ->required();

  EngineFlags gen_flags;
  k3::engine::GenerateJob gen_job;
  auto* gen = app.add_subcommand("generate", "generate from a prompt of token ids");
  gen_flags.add(gen);
  gen->add_option("--ids", gen_job.ids, "prompt token ids, comma-separated");
  gen->add_option("--prompt", gen_job.prompt, "prompt text (encoded with the model's tokenizer)");
  gen->add_option("--chat", gen_job.chat, "a user message, rendered in K3's chat format");
  gen->add_flag("!--no-thinking", gen_job.thinking,
                "with --chat: answer without the think channel");
  gen->add_option("--max-tokens", gen_job.max_tokens, "tokens to generate")
      ->check(CLI::Range(0, 1 << 20));
  gen->add_option("--temperature", gen_job.sampling.temperature, "0 = greedy")
      ->check(CLI::Range(0.0, 100.0));
  gen->add_option("--top-p", gen_job.sampling.top_p, "nucleus sampling: the probability mass kept")
      ->check(CLI::Range(0.0, 1.0));
  gen->add_option("--top-k", gen_job.sampling.top_k, "0 = off")->check(CLI::NonNegativeNumber);
  gen->add_option("--seed", gen_job.sampling.seed, "sampling seed");
  gen->add_option("--stop-id", gen_job.stop_ids, "extra stop token id (repeatable)");

  EngineFlags serve_flags;
  ServeFlags serve_only;
  auto* srv = app.add_subcommand("serve", "serve requests from the gateway (control API)");
  srv->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  std::string config_file;  // read before parsing (shared/base/config_file.h)
  srv->add_option("--config", config_file,
                  "config file: JSON object of flag names to values; flags given here override it");
  serve_flags.add(srv);
  serve_only.add(srv);

  // A config file's flags go right after the subcommand.
  size_t sub = 1;
  while (sub < static_cast<size_t>(argc) && argv[sub][0] == '-')  // --log-level L
    sub += std::strchr(argv[sub], '=') != nullptr ? 1 : 2;
  const std::vector<std::string> switches = {"no-direct", "strict", "mmap", "verify-dense",
                                             "insecure-remote"};
  K3_PARSE_WITH_CONFIG(app, argc, argv, sub + 1, switches, *srv);
  auto log = k3::logger("engined");
  if (!k3::set_log_level(level)) {
    log->error("unknown --log-level '{}'", level);
    return 2;
  }
  k3::Status st;
  if (*score) {
    score_job.model_dir = score_flags.model_dir;
    score_job.extra_dirs = score_flags.extra_dirs;
    auto o = score_flags.resolve();
    st = o.status();
    if (o.ok()) {
      score_job.engine = *o;
      auto x = score_flags.experts(*o);
      st = x.status();
      if (x.ok()) {
        score_job.experts = *x;
        st = k3::engine::run_score(score_job);
      }
    }
  } else if (*gen) {
    gen_job.model_dir = gen_flags.model_dir;
    gen_job.extra_dirs = gen_flags.extra_dirs;
    auto o = gen_flags.resolve();
    st = o.status();
    if (o.ok()) {
      gen_job.engine = *o;
      auto x = gen_flags.experts(*o);
      st = x.status();
      if (x.ok()) {
        gen_job.experts = *x;
        st = k3::engine::run_generate(gen_job);
      }
    }
  } else {
    return serve(serve_flags, serve_only);
  }
  if (!st.ok()) {
    log->error("{}", st.message());
    return 1;
  }
  return 0;
}
