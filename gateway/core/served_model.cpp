#include "gateway/core/served_model.h"

#include <algorithm>
#include <filesystem>
#include <system_error>

#include "gateway/core/json_text.h"
#include "shared/base/file.h"

namespace k3::gateway {

using nlohmann::ordered_json;

StatusOr<ModelIdentity> read_model_identity(const std::string& model_dir) {
  ModelIdentity out;
  const std::string path = (std::filesystem::path(model_dir) / "config.json").string();
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) return out;
  K3_ASSIGN_OR_RETURN(std::string text, base::read_small_file(path));
  K3_ASSIGN_OR_RETURN(ordered_json config, parse_json_text(text, path));
  if (!config.is_object()) return absl::InvalidArgumentError(cat(path, " is not a JSON object"));
  if (auto type = config.find("model_type"); type != config.end() && type->is_string())
    out.is_k3 = *type == "kimi_k3";
  if (auto arch = config.find("architectures"); arch != config.end() && arch->is_array())
    for (const ordered_json& a : *arch)
      if (a.is_string() && a.get_ref<const std::string&>().rfind("KimiK3", 0) == 0)
        out.is_k3 = true;
  // The published layout keeps the text model's settings under text_config.
  for (const ordered_json* o :
       {&config, config.contains("text_config") ? &config["text_config"] : nullptr}) {
    if (o == nullptr || !o->is_object() || out.context_limit > 0) continue;
    auto limit = o->find("max_position_embeddings");
    if (limit == o->end() || limit->is_null()) continue;
    if (!limit->is_number_integer() || limit->get<int64_t>() < 1)
      return absl::InvalidArgumentError(
          cat(path, ": max_position_embeddings must be a positive integer"));
    out.context_limit = limit->get<int64_t>();
  }
  return out;
}

std::string default_served_name(const std::string& model_dir, const ModelIdentity& identity) {
  if (identity.is_k3) return kK3ServedName;
  std::string name = std::filesystem::path(model_dir).lexically_normal().filename().string();
  if (name.empty() || name == "." || name == "..")
    name = std::filesystem::path(model_dir).lexically_normal().parent_path().filename().string();
  return name.empty() || name == "." || name == ".." ? "k3" : name;
}

int64_t effective_context(int64_t engined_max_context, int64_t model_limit) {
  if (engined_max_context <= 0) return std::max<int64_t>(model_limit, 0);
  if (model_limit <= 0) return engined_max_context;
  return std::min(engined_max_context, model_limit);
}

}  // namespace k3::gateway
