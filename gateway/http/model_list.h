// GET /v1/models and /v1/models/{id}: the served model, one entry per name it
// answers to (--served-model-name), as OpenAI's list object with vLLM's
// max_model_len.
//
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace k3::gateway {

struct ModelEntry {
  std::string id;
  int64_t created = 0;  // Unix seconds
  std::string owned_by;
  // The context in tokens (served_model.h's effective_context); 0: not
  // known yet (engined has not answered), left out.
  int64_t max_model_len = 0;
};

// One entry: {"id", "object": "model", "created", "owned_by", "max_model_len"}.
nlohmann::json model_json(const ModelEntry& model);
// {"object": "list", "data": [model_json...]}.
nlohmann::json models_json(const std::vector<ModelEntry>& models);
// The served model under each of `names` (the first is the primary).
std::vector<ModelEntry> model_entries(const std::vector<std::string>& names, int64_t created,
                                      int64_t max_model_len);

}  // namespace k3::gateway
