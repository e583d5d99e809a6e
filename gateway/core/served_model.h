// What the gateway serves the model as: the names requests may use
// (--served-model-name, vLLM's flag) and the context it advertises. Read
// from the model's config.json, which says whether it is a Kimi K3
// checkpoint (then served as "kimi-k3" by default, not as its directory's
// name) and may state the model's own context limit.
//
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>

#include "shared/status.h"

namespace k3::gateway {

// The default served name of a K3 checkpoint.
inline constexpr const char* kK3ServedName = "kimi-k3";

// What config.json says about the model.
struct ModelIdentity {
  // model_type "kimi_k3", or an entry of architectures starting with
  // "KimiK3" (the published KimiK3ForConditionalGeneration).
  bool is_k3 = false;
  // max_position_embeddings (at the top, else in text_config); 0: none.
  int64_t context_limit = 0;
};

// MODEL_DIR/config.json's identity; a directory without config.json has
// the defaults (not K3, no limit). InvalidArgument naming the file when it
// is not a JSON object or its fields have the wrong type.
StatusOr<ModelIdentity> read_model_identity(const std::string& model_dir);

// The name served when --served-model-name is not given: "kimi-k3" for a
// K3 checkpoint, else the directory's name, else "k3".
std::string default_served_name(const std::string& model_dir, const ModelIdentity& identity);

// The context advertised and enforced: the smaller of engined's
// --max-context and the model's limit, each 0 when unknown (0: neither
// known).
int64_t effective_context(int64_t engined_max_context, int64_t model_limit);

}  // namespace k3::gateway
