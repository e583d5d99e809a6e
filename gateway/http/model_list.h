// GET /v1/models: the served model as OpenAI's list object.
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
};

// {"object": "list", "data": [{"id", "object": "model", "created", "owned_by"}]}.
nlohmann::json models_json(const std::vector<ModelEntry>& models);

}  // namespace k3::gateway
