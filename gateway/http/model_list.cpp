#include "gateway/http/model_list.h"

namespace k3::gateway {

using nlohmann::json;

json model_json(const ModelEntry& m) {
  json out = {{"id", m.id}, {"object", "model"}, {"created", m.created}, {"owned_by", m.owned_by}};
  if (m.max_model_len > 0) out["max_model_len"] = m.max_model_len;
  return out;
}

json models_json(const std::vector<ModelEntry>& models) {
  json data = json::array();
  for (const ModelEntry& m : models) data.push_back(model_json(m));
  return {{"object", "list"}, {"data", std::move(data)}};
}

std::vector<ModelEntry> model_entries(const std::vector<std::string>& names, int64_t created,
                                      int64_t max_model_len) {
  std::vector<ModelEntry> out;
  for (const std::string& name : names) out.push_back({name, created, "k3serve", max_model_len});
  return out;
}

}  // namespace k3::gateway
