// What `k3ctl inspect` says about a model: parameters (total and active per
// token), layers by kind, routed experts and their bytes, context length,
// stored dtypes, sizes. The model's side comes from config.json alone (so the
// published config can be summarised without its 1.5 TB of weights); the
// stored side from an opened checkpoint when there is one.
//
// Not thread-safe (a value).
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/model_config.h"
#include "shared/status.h"

namespace k3::tools {

struct ModelSummary {
  // From config.json.
  int64_t layers = 0, kda_layers = 0, mla_layers = 0;
  int64_t dense_ffn_layers = 0, moe_layers = 0;  // first_k_dense_replace, the rest
  int64_t hidden_size = 0, vocab_size = 0;
  int64_t experts = 0, top_k = 0, shared_experts = 0;
  uint64_t expert_bytes = 0;              // stored bytes of one routed expert (MXFP4)
  uint64_t expert_parameters = 0;         // weights of one routed expert
  uint64_t dense_parameters = 0;          // every weight but the routed experts
  uint64_t parameters = 0;                // dense + every routed expert
  uint64_t active_parameters = 0;         // dense + top-k routed experts per MoE layer
  uint64_t expert_set_bytes = 0;          // every routed expert of every MoE layer
  uint64_t expert_bytes_per_token = 0;    // top-k experts per MoE layer: what decode reads
  std::optional<int64_t> context_length;  // max_position_embeddings, when config.json says

  // From the checkpoint (absent with config only).
  struct DTypeUse {
    int64_t tensors = 0;
    uint64_t bytes = 0;
  };
  struct Stored {
    std::map<std::string, DTypeUse> dtypes;  // "BF16" -> use
    uint64_t bytes = 0;                      // every tensor
    uint64_t expert_bytes = 0;               // routed-expert tensors
    uint64_t unused_bytes = 0;               // tensors the text model does not use
    int64_t tensors = 0;
    int64_t shards = 0;
  };
  std::optional<Stored> stored;
};

// The config side. `config_json` is config.json's text (for the fields
// ModelConfig does not keep: the context length).
ModelSummary summarize_config(const checkpoint::ModelConfig& c, const std::string& config_json);

// Adds the stored side: every tensor of `ck` by dtype; `unused` names the
// tensors the model does not use (checkpoint::unused_tensors).
void add_stored(ModelSummary& s, const checkpoint::Checkpoint& ck,
                const std::vector<std::string>& unused);

// The readable form: one "label  value" line per aspect.
std::string render_summary_text(const ModelSummary& s);

// The fields `inspect`'s JSON line gains (parameters, context_length, dtypes...).
void add_summary_json(const ModelSummary& s, nlohmann::json& out);

// "2.80 T", "52.3 G", "896": a count in SI units, three significant digits.
std::string si_count(double v);
// "17.55 MB", "1.62 TB": bytes in decimal units.
std::string si_bytes(double bytes);

}  // namespace k3::tools
