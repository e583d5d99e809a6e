// `k3ctl mkmodel`: writes a complete synthetic K3-architecture checkpoint.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "shared/status.h"

namespace k3::tools {

struct MkModelOptions {
  std::string preset = "tiny";  // "tiny" or "k3-slice"
  std::string out_dir;
  uint64_t seed = 1;
  // Shards of the text model; the vision tower's two shards come after them
  // (model-N+1, model-N+2 of N+2).
  int shards = 3;
  bool force = false;                // write into a non-empty directory
  std::string dense_dtype = "bf16";  // bf16, f16 or f32
  // Overrides of the preset, by config key (e.g. "hidden_size", "num_experts",
  // "kda_num_heads", "mla_every"); see apply_overrides() for the names.
  std::map<std::string, int64_t> overrides;
  // Target number of BPE ranks of the generated tokenizer.
  int64_t vocab_ranks = 3840;
  // Progress with an ETA on stderr while the shards are written.
  bool progress = true;
};

// An override that changes nothing in the model written (e.g. num_experts
// when no layer is MoE), and why.
struct NoEffect {
  std::string key;  // the config key, as in MkModelOptions::overrides
  std::string why;
};

// The knob names accepted in MkModelOptions::overrides.
const std::map<std::string, std::string>& override_help();

struct MkModelResult {
  uint64_t bytes_written = 0;
  int shards = 0;  // files written: the text model's and the vision tower's
  int64_t vocab_size = 0;
  double seconds = 0;
  std::vector<NoEffect> no_effect;  // overrides that did nothing
};

StatusOr<MkModelResult> make_model(const MkModelOptions& opt);

}  // namespace k3::tools
