#include "engined/config.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <optional>

#include "shared/base/log.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/container.h"
#include "shared/checkpoint/manifest.h"
#include "shared/experts/remote_protocol.h"

namespace k3::engined {

void EngineFlags::add(CLI::App* cmd) {
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
  cmd->add_option("--chunk", chunk,
                  "prefill chunk in tokens (1 = token at a time); default: 32, and serve reads "
                  "long prompts in big chunks in parts between other sessions' steps")
      ->check(CLI::Range(int64_t{1}, experts::kMaxChunkTokens));  // hosts' receive cap
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
                  "--mmap only with --verify-dense), and so is every expert read in-process or "
                  "received as bytes from a remote host (--remote-mode bytes) (default: none)");
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
                  "deadline of connecting to a remote host, and the base of each layer "
                  "step's deadline (see --remote-min-mbps); a host that misses it is given up "
                  "(its work re-issued on a replica)")
      ->check(CLI::Range(1, 600000));
  cmd->add_option("--remote-min-mbps", remote_min_mbps,
                  "slowest rate a remote host may serve at, in MB/s (10^6 bytes): a layer "
                  "step's deadline is --remote-deadline-ms plus its experts' bytes at this "
                  "rate (computing there: plus its token rows' activations and results at this "
                  "rate and their compute at 1 G multiply-adds/s), counted from when the step "
                  "goes out, so a host answering slowly is given up like a silent one")
      ->check(CLI::Range(1.0, 1e6));
  cmd->add_option("--remote-mode", remote_mode,
                  "compute (the hosts compute the rows, default) | bytes (they send the "
                  "experts' bytes, computed here)")
      ->check(CLI::IsMember({"compute", "bytes"}));
}

StatusOr<engined::EngineOptions> EngineFlags::resolve() const {
  K3_ASSIGN_OR_RETURN(std::optional<checkpoint::ContainerInfo> container,
                      checkpoint::read_container_info(model_dir));
  engined::EngineOptions o;
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
  o.chunk = chunk > 0 ? chunk : 32;
  o.expert_top_p = expert_top_p;
  o.speculation = speculate == "on"    ? engined::SpeculationMode::kOn
                  : speculate == "off" ? engined::SpeculationMode::kOff
                                       : engined::SpeculationMode::kAuto;
  o.sequence_groups = sequence_groups;
  if (threads > 0) omp_set_num_threads(threads);
  if (verify_dense && manifest.empty())
    return absl::InvalidArgumentError("--verify-dense needs --manifest FILE");
  if (!manifest.empty()) {
    K3_ASSIGN_OR_RETURN(checkpoint::Manifest m, checkpoint::Manifest::load(manifest));
    o.manifest = std::make_shared<const checkpoint::Manifest>(std::move(m));
    o.verify_dense = verify_dense;
  }
  return o;
}

StatusOr<engined::ExpertSourceOptions> EngineFlags::experts(
    const engined::EngineOptions& engine) const {
  engined::ExpertSourceOptions o;
  o.manifest = engine.manifest;
  o.cache_bytes = static_cast<uint64_t>(std::max(0.0, expert_cache_gb) * 1e9);
  o.loader_threads = loader_threads;
  o.direct_io = !no_direct;
  o.expertd_segments = expertd;
  o.remote_tls = tls;
  o.remote_token_file = auth_token_file;
  o.insecure_remote = insecure_remote;
  o.remote_deadline_ms = remote_deadline_ms;
  o.remote_min_mbps = remote_min_mbps;
  o.remote_bytes = remote_mode == "bytes";
  K3_RETURN_IF_ERROR(engined::parse_remote_flags(remote_expertd, &o));
  if (insecure_remote)
    base::logger("engined")->warn(
        "--insecure-remote: activations and the token travel to the remote expertd "
        "unencrypted");
  return o;
}

void ServeFlags::add(CLI::App* cmd) {
  cmd->add_option("--listen", listen, "control service address (unix:PATH or HOST:PORT)");
  cmd->add_option("--sessions", sessions, "decode sessions kept (each holds a sequence state)")
      ->check(CLI::Range(1, 1024));
  cmd->add_option("--checkpoint-mb", checkpoint_mb,
                  "RAM budget for saved sequence states (turn checkpoints and prefill "
                  "snapshots; 0 = none in RAM)")
      ->check(CLI::Range(0.0, 1e9));
  cmd->add_option("--checkpoint-dir", checkpoint_dir,
                  "also keep saved states in files here, within --checkpoint-disk-gb; files "
                  "survive restarts (validated at start, never wiped)");
  cmd->add_option("--checkpoint-disk-gb", checkpoint_disk_gb,
                  "disk budget for --checkpoint-dir's files (GB; least recently used evicted)")
      ->check(CLI::Range(0.0, 1e6));
  cmd->add_option("--snapshot-tokens", snapshot_tokens,
                  "save a prefill snapshot every this many prompt tokens, so a later prompt "
                  "sharing the prefix resumes there (0 = off; needs --checkpoint-mb or "
                  "--checkpoint-dir)")
      ->check(CLI::Range(int64_t{0}, int64_t{1} << 24));
  cmd->add_option("--max-context", max_context, "tokens a session may hold")
      ->check(CLI::Range(int64_t{16}, int64_t{1} << 24));
}

Status ServeFlags::validate() const {
  if (!checkpoint_dir.empty() && checkpoint_disk_gb <= 0)
    return absl::InvalidArgumentError(cat("--checkpoint-dir ", checkpoint_dir,
                                          " with --checkpoint-disk-gb 0 would keep no file: give "
                                          "the directory a budget or leave --checkpoint-dir out"));
  return absl::OkStatus();
}

engined::EngineLoopOptions ServeFlags::loop_options() const {
  engined::EngineLoopOptions lo;
  lo.sessions = sessions;
  lo.checkpoints.budget_bytes = static_cast<uint64_t>(checkpoint_mb * 1e6);
  lo.checkpoints.dir = checkpoint_dir;
  lo.checkpoints.disk_budget_bytes =
      checkpoint_dir.empty() ? 0 : static_cast<uint64_t>(checkpoint_disk_gb * 1e9);
  lo.snapshot_tokens = snapshot_tokens;
  return lo;
}

void Config::add_flags(CLI::App& app) {
  app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
  app.add_option("--log-format", log_format,
                 "log lines: text (time with its UTC offset, level, component, message) or json "
                 "(one object per line: time, level, daemon, message, request_id)")
      ->check(CLI::IsMember({"text", "json"}));

  score = app.add_subcommand("score", "teacher-forced logits of every position (f32 [T, vocab])");
  score_flags.add(score);
  score->add_option("--ids", score_job.ids, "prompt token ids, comma-separated")->required();
  score->add_option("--out", score_job.out, "output file (little-endian f32 [T, vocab])")
      ->required();

  generate = app.add_subcommand("generate", "generate from a prompt of token ids");
  generate_flags.add(generate);
  generate->add_option("--ids", generate_job.ids, "prompt token ids, comma-separated");
  generate->add_option("--prompt", generate_job.prompt,
                       "prompt text (encoded with the model's tokenizer)");
  generate->add_option("--chat", generate_job.chat, "a user message, rendered in K3's chat format");
  generate->add_flag("!--no-thinking", generate_job.thinking,
                     "with --chat: answer without the think channel");
  generate->add_option("--max-tokens", generate_job.max_tokens, "tokens to generate")
      ->check(CLI::Range(0, 1 << 20));
  generate->add_option("--temperature", generate_job.sampling.temperature, "0 = greedy")
      ->check(CLI::Range(0.0, 100.0));
  generate
      ->add_option("--top-p", generate_job.sampling.top_p,
                   "nucleus sampling: the probability mass kept")
      ->check(CLI::Range(0.0, 1.0));
  generate->add_option("--top-k", generate_job.sampling.top_k, "0 = off")
      ->check(CLI::NonNegativeNumber);
  generate->add_option("--seed", generate_job.sampling.seed, "sampling seed");
  generate->add_option("--stop-id", generate_job.stop_ids, "extra stop token id (repeatable)");

  serve = app.add_subcommand("serve", "serve requests from the gateway (control API)");
  serve->option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
  serve->add_option(
      "--config", config_file,
      "config file: JSON object of flag names to values; flags given here override it");
  serve_flags.add(serve);
  serve_only.add(serve);
}

size_t Config::config_insert_position(int argc, char** argv) {
  size_t sub = 1;
  while (sub < static_cast<size_t>(argc) && argv[sub][0] == '-')  // --log-level L
    sub += std::strchr(argv[sub], '=') != nullptr ? 1 : 2;
  return sub + 1;
}

std::vector<std::string> Config::switches() {
  return {"no-direct", "strict", "mmap", "verify-dense", "insecure-remote"};
}

namespace {

// A job's model, engine and expert options from its flags.
template <typename Job>
Status resolve_job(const EngineFlags& flags, Job* job) {
  job->model_dir = flags.model_dir;
  job->extra_dirs = flags.extra_dirs;
  K3_ASSIGN_OR_RETURN(job->engine, flags.resolve());
  K3_ASSIGN_OR_RETURN(job->experts, flags.experts(job->engine));
  return absl::OkStatus();
}

}  // namespace

Status Config::validate_job() {
  if (*score) return resolve_job(score_flags, &score_job);
  return resolve_job(generate_flags, &generate_job);
}

std::string Config::serve_summary(const engined::EngineOptions& engine) const {
  const EngineFlags& f = serve_flags;
  const ServeFlags& s = serve_only;
  return fmt::format(
      "serve: model={} listen={} sessions={} checkpoint_mb={} checkpoint_dir={} "
      "checkpoint_disk_gb={} snapshot_tokens={} max_context={} expertd=[{}] remote_expertd=[{}] "
      "dense_bits={} chunk={} manifest={}",
      f.model_dir, s.listen, s.sessions, s.checkpoint_mb,
      s.checkpoint_dir.empty() ? "(none)" : s.checkpoint_dir, s.checkpoint_disk_gb,
      s.checkpoint_mb > 0 || !s.checkpoint_dir.empty() ? std::to_string(s.snapshot_tokens)
                                                       : std::string("off (no checkpoints)"),
      s.max_context, fmt::join(f.expertd, ","), fmt::join(f.remote_expertd, ","),
      engine.quant.dense_bits, f.chunk > 0 ? std::to_string(f.chunk) : std::string("policy"),
      f.manifest.empty() ? "none" : f.manifest);
}

}  // namespace k3::engined
