#include "gateway/core/topology_file.h"

#include <nlohmann/json.hpp>

#include "shared/shm/segment.h"

namespace k3::gateway {

StatusOr<std::vector<ExpertdEntry>> parse_topology(std::string_view text, std::string_view origin) {
  nlohmann::json j = nlohmann::json::parse(text.begin(), text.end(), nullptr, false);
  if (j.is_discarded()) return absl::InvalidArgumentError(cat(origin, ": not valid JSON"));
  if (!j.is_object() || !j.contains("expertd") || !j["expertd"].is_array())
    return absl::InvalidArgumentError(cat(origin, ": expected {\"expertd\": [...]}"));
  std::vector<ExpertdEntry> out;
  for (size_t i = 0; i < j["expertd"].size(); ++i) {
    const auto& e = j["expertd"][i];
    const std::string where = cat(origin, ": expertd[", i, "]");
    if (!e.is_object()) return absl::InvalidArgumentError(cat(where, " must be an object"));
    if (!e.contains("address") || !e["address"].is_string() ||
        e["address"].get<std::string>().empty())
      return absl::InvalidArgumentError(cat(where, ".address must be a non-empty string"));
    ExpertdEntry x;
    x.address = e["address"].get<std::string>();
    if (e.contains("name")) {
      if (!e["name"].is_string())
        return absl::InvalidArgumentError(cat(where, ".name must be a string"));
      x.name = e["name"].get<std::string>();
    }
    if (e.contains("segment")) {
      if (!e["segment"].is_string() || !shm::valid_segment_ref(e["segment"].get<std::string>()))
        return absl::InvalidArgumentError(
            cat(where, ".segment must be a segment name or an absolute DIR/NAME path"));
      x.segment = e["segment"].get<std::string>();
    }
    if (x.name.empty()) x.name = x.address;
    for (const auto& prev : out)
      if (prev.address == x.address || prev.name == x.name)
        return absl::InvalidArgumentError(cat(where, " repeats ", x.name, " / ", x.address));
    out.push_back(std::move(x));
  }
  return out;
}

}  // namespace k3::gateway
