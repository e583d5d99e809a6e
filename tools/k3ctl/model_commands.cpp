#include "tools/k3ctl/commands.h"

#include <cstdio>
#include <memory>
#include <nlohmann/json.hpp>
#include <set>

#include <unistd.h>

#include <grpcpp/grpcpp.h>

#include "k3serve/v1/engine.grpc.pb.h"
#include "k3serve/v1/expert.grpc.pb.h"
#include "k3serve/v1/gateway.grpc.pb.h"
#include "shared/base/file.h"
#include "shared/base/hash.h"
#include "shared/base/log.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/container.h"
#include "shared/checkpoint/expert_index.h"
#include "tools/k3ctl/model_summary.h"
#include "tools/mkmodel/mkmodel.h"

namespace k3::tools {
namespace {

// CLI flag -> config key, for mkmodel's dimension overrides.
const std::vector<std::pair<std::string, std::string>> kDimFlags = {
    {"hidden", "hidden_size"},
    {"layers", "num_hidden_layers"},
    {"dense-layers", "first_k_dense_replace"},
    {"inter", "intermediate_size"},
    {"mla-heads", "num_attention_heads"},
    {"q-lora", "q_lora_rank"},
    {"kv-lora", "kv_lora_rank"},
    {"nope", "qk_nope_head_dim"},
    {"rope", "qk_rope_head_dim"},
    {"v-dim", "v_head_dim"},
    {"experts", "num_experts"},
    {"top-k", "num_experts_per_token"},
    {"expert-inter", "moe_intermediate_size"},
    {"latent", "routed_expert_hidden_size"},
    {"shared-experts", "num_shared_experts"},
    {"block-size", "attn_res_block_size"},
    {"kda-heads", "kda_num_heads"},
    {"kda-head-dim", "kda_head_dim"},
    {"conv-kernel", "short_conv_kernel_size"},
    {"mla-every", "mla_every"},
};

void add_mkmodel_command(CLI::App& app) {
  auto opt = std::make_shared<tools::MkModelOptions>();
  auto dims = std::make_shared<std::map<std::string, int64_t>>();
  auto* cmd = app.add_subcommand("mkmodel", "write a synthetic K3-architecture checkpoint");
  cmd->add_option("--preset", opt->preset, "tiny | k3-slice")
      ->check(CLI::IsMember({"tiny", "k3-slice"}));
  cmd->add_option("--out", opt->out_dir, "output directory")->required();
  cmd->add_option("--seed", opt->seed, "random seed (same seed, same bytes)");
  cmd->add_option("--shards", opt->shards,
                  "shard files of the text model (the vision tower's two come after)")
      ->check(CLI::Range(1, 999));
  cmd->add_option("--dense-dtype", opt->dense_dtype, "bf16 | f16 | f32")
      ->check(CLI::IsMember({"bf16", "f16", "f32"}));
  cmd->add_option("--vocab-ranks", opt->vocab_ranks, "BPE ranks to train")
      ->check(CLI::Range(256, 100000));
  cmd->add_flag("--force", opt->force, "overwrite model files in a non-empty directory");
  for (const auto& [flag, key] : kDimFlags) {
    std::string k = key;
    cmd->add_option_function<int64_t>(
        "--" + flag, [dims, k](int64_t v) { (*dims)[k] = v; },
        tools::override_help().at(key) + " (default: the preset's)");
  }
  cmd->callback([opt, dims] {
    opt->overrides = *dims;
    auto r = tools::make_model(*opt);
    if (!r.ok()) return fail(msg(r.status()));
    for (const tools::NoEffect& n : r->no_effect) {
      std::string flag = n.key;
      for (const auto& [f, key] : kDimFlags)
        if (key == n.key) flag = f;
      std::fprintf(stderr, "k3ctl mkmodel: warning: --%s has no effect: %s\n", flag.c_str(),
                   n.why.c_str());
    }
    std::printf("%s\n", nlohmann::json({{"out", opt->out_dir},
                                        {"preset", opt->preset},
                                        {"seed", opt->seed},
                                        {"shards", r->shards},
                                        {"vocab_size", r->vocab_size},
                                        {"bytes", r->bytes_written},
                                        {"seconds", r->seconds}})
                            .dump()
                            .c_str());
  });
}

// How inspect prints: the readable summary on a terminal, the JSON line
// otherwise (scripts and tests read stdout through a pipe: that contract is
// kept), either one forced by --format.
bool inspect_as_json(const std::string& format) {
  if (format == "auto") return ::isatty(STDOUT_FILENO) == 0;
  return format == "json";
}

void add_inspect_command(CLI::App& app) {
  auto model = std::make_shared<std::string>();
  auto extra = std::make_shared<std::vector<std::string>>();
  auto strict = std::make_shared<bool>(false);
  auto config_only = std::make_shared<bool>(false);
  auto format = std::make_shared<std::string>("auto");
  auto* cmd = app.add_subcommand(
      "inspect",
      "validate a checkpoint and print its summary: parameters, layers, experts, context, "
      "dtypes, sizes (readable on a terminal, one JSON line otherwise)");
  cmd->add_option("--model", *model, "model directory")->required();
  cmd->add_option("--shard-dir", *extra, "extra shard directory (repeatable)");
  cmd->add_flag("--strict", *strict,
                "fail when the checkpoint holds tensors the model does not use, or the index "
                "names shards that are missing, even of such tensors (default: warn)");
  cmd->add_flag("--config-only", *config_only,
                "summarise config.json alone, reading no weights (a published config without "
                "its shards; default: off, the checkpoint is opened and validated)");
  auto* fmt = cmd->add_option("--format", *format,
                              "text | json | auto: auto prints the readable summary when stdout "
                              "is a terminal and the JSON line otherwise (default auto)")
                  ->check(CLI::IsMember({"text", "json", "auto"}));
  cmd->add_flag_callback(
         "--json", [format] { *format = "json"; }, "the JSON line (same as --format json)")
      ->excludes(fmt);
  cmd->callback([model, extra, strict, config_only, format] {
    auto config = checkpoint::load_model_config(*model);
    if (!config.ok()) return fail(msg(config.status()));
    auto config_text = base::read_small_file(*model + "/config.json");
    if (!config_text.ok()) return fail(msg(config_text.status()));
    ModelSummary summary = summarize_config(*config, *config_text);
    int64_t kda = 0;
    for (bool b : config->layer_is_kda) kda += b;
    nlohmann::json out = {{"model", *model},
                          {"layers", config->num_hidden_layers},
                          {"kda_layers", kda},
                          {"mla_layers", config->num_hidden_layers - kda},
                          {"hidden_size", config->hidden_size},
                          {"vocab_size", config->vocab_size},
                          {"experts_per_layer", config->num_experts},
                          {"moe_layers", config->num_moe_layers()},
                          {"expert_bytes", config->expert_bytes()}};
    std::string header = cat("model        ", *model, "\n");
    if (*config_only) {
      out["config_only"] = true;
      add_summary_json(summary, out);
      if (inspect_as_json(*format))
        std::printf("%s\n", out.dump().c_str());
      else
        std::printf("%s%s", header.c_str(), render_summary_text(summary).c_str());
      return;
    }
    auto container = checkpoint::read_container_info(*model);
    if (!container.ok()) return fail(msg(container.status()));
    const bool dense_only = *container && (*container)->dense_only;
    auto ck = checkpoint::Checkpoint::open(*model, *extra);
    if (!ck.ok()) return fail(msg(ck.status()));
    for (const std::string& w : (*ck)->missing_shard_warnings())
      std::fprintf(stderr, "k3ctl: warning: %s: %s\n", model->c_str(), w.c_str());
    if (*strict)
      if (Status s = (*ck)->refuse_missing_shards(); !s.ok()) return fail(msg(s));
    std::set<std::string> used;
    if (auto s = checkpoint::check_tensors(**ck, *config, !dense_only, &used); !s.ok())
      return fail(msg(s));
    const std::vector<std::string> unused = checkpoint::unused_tensors(**ck, used);
    for (const std::string& name : unused)
      std::fprintf(stderr, "k3ctl: %s: tensor '%s' is not used by the model\n", model->c_str(),
                   name.c_str());
    if (*strict && !unused.empty())
      return fail(cat(*model, ": ", unused.size(), " tensor(s) the model does not use (--strict)"));
    int64_t contiguous = 0;
    if (!dense_only) {
      auto idx = checkpoint::ExpertIndex::build(**ck, *config);
      if (!idx.ok()) return fail(msg(idx.status()));
      contiguous = idx->contiguous_count();
    }
    add_stored(summary, **ck, unused);
    const std::string fp = base::hex64((*ck)->fingerprint());
    out["fingerprint"] = fp;
    out["experts_contiguous"] = contiguous;
    out["shards"] = (*ck)->files().size();
    out["tensors"] = (*ck)->tensors().size();
    out["unused_tensors"] = unused.size();
    out["missing_shards"] = (*ck)->missing_unused_shards().size();
    out["total_bytes"] = (*ck)->total_bytes();
    out["name_prefix"] = (*ck)->prefix();
    add_summary_json(summary, out);
    if (*container)
      out["container"] = {{"dense_bits", (*container)->dense_bits},
                          {"mla_bits", (*container)->mla_bits},
                          {"head_bits", (*container)->head_bits},
                          {"dense_only", dense_only}};
    if (inspect_as_json(*format)) {
      std::printf("%s\n", out.dump().c_str());
      return;
    }
    header += cat("fingerprint  ", fp, "\n");
    if (*container)
      header += cat("container    repacked: dense ", (*container)->dense_bits, ", MLA ",
                    (*container)->mla_bits, ", head ", (*container)->head_bits, " bits",
                    dense_only ? ", dense part only (experts served from the source)" : "", "\n");
    std::printf("%s%s", header.c_str(), render_summary_text(summary).c_str());
  });
}

void add_health_command(CLI::App& app) {
  auto address = std::make_shared<std::string>();
  auto service = std::make_shared<std::string>();
  auto* cmd = app.add_subcommand("health", "ask a daemon's gRPC Health (prints JSON)");
  cmd->add_option("--address", *address, "unix:PATH or HOST:PORT")->required();
  cmd->add_option("--service", *service, "expertd | engined | gateway")
      ->required()
      ->check(CLI::IsMember({"expertd", "engined", "gateway"}));
  cmd->callback([address, service] {
    auto channel = grpc::CreateChannel(*address, grpc::InsecureChannelCredentials());
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    k3serve::v1::HealthRequest req;
    k3serve::v1::HealthResponse resp;
    grpc::Status st;
    if (*service == "expertd")
      st = k3serve::v1::ExpertService::NewStub(channel)->Health(&ctx, req, &resp);
    else if (*service == "engined")
      st = k3serve::v1::EngineService::NewStub(channel)->Health(&ctx, req, &resp);
    else
      st = k3serve::v1::Gateway::NewStub(channel)->Health(&ctx, req, &resp);
    if (!st.ok()) return fail(cat(*address, ": ", st.error_message()));
    nlohmann::json out = {
        {"component", resp.component()},
        {"status", k3serve::v1::HealthResponse::ServingStatus_Name(resp.status())},
        {"version", resp.version()}};
    if (!resp.detail().empty()) out["detail"] = resp.detail();
    std::printf("%s\n", out.dump().c_str());
    if (resp.status() != k3serve::v1::HealthResponse::SERVING) set_exit_code(1);
  });
}

const CommandRegistrar kMkmodel(add_mkmodel_command);
const CommandRegistrar kInspect(add_inspect_command);
const CommandRegistrar kHealth(add_health_command);

}  // namespace
}  // namespace k3::tools
