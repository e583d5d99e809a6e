#include "gateway/http/model_list.h"

namespace k3::gateway {

using nlohmann::json;

json models_json(const std::vector<ModelEntry>& models) {
  json data = json::array();
  for (const ModelEntry& m : models) {
    data.push_back(
        {{"id", m.id}, {"object", "model"}, {"created", m.created}, {"owned_by", m.owned_by}});
  }
  return {{"object", "list"}, {"data", std::move(data)}};
}

}  // namespace k3::gateway
