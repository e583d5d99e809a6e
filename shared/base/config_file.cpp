#include "shared/base/config_file.h"
#include "shared/base/json_file.h"

#include <algorithm>

#include <nlohmann/json.hpp>

#include "shared/base/file.h"

namespace k3::base {

namespace {

StatusOr<std::string> scalar_text(const nlohmann::json& v, const std::string& where) {
  if (v.is_string()) return v.get<std::string>();
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number_unsigned()) return std::to_string(v.get<uint64_t>());
  if (v.is_number_float()) return nlohmann::json(v.get<double>()).dump();
  return absl::InvalidArgumentError(cat(where, " must be a string or a number"));
}

}  // namespace

StatusOr<std::vector<std::string>> expand_config_file(
    const std::vector<std::string>& args, size_t insert_at,
    const std::vector<std::string>& flag_switches,
    const std::function<bool(const std::string&)>& known) {
  std::vector<std::string> rest;
  std::string path;
  for (size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--config") {
      if (i + 1 >= args.size()) return absl::InvalidArgumentError("--config needs a file");
      if (!path.empty()) return absl::InvalidArgumentError("--config given twice");
      path = args[++i];
    } else if (args[i].rfind("--config=", 0) == 0) {
      if (!path.empty()) return absl::InvalidArgumentError("--config given twice");
      path = args[i].substr(9);
    } else {
      rest.push_back(args[i]);
    }
  }
  if (path.empty()) return rest;
  K3_ASSIGN_OR_RETURN(std::string text, read_small_file(path, 1u << 20));
  K3_ASSIGN_OR_RETURN(nlohmann::json j, parse_json_file(text, path));
  if (!j.is_object())
    return absl::InvalidArgumentError(cat(path, ": expected a JSON object of flag: value"));
  std::vector<std::string> flags;
  for (const auto& [key, value] : j.items()) {
    std::string name = key;
    std::replace(name.begin(), name.end(), '_', '-');
    const std::string where = cat(path, ": '", key, "'");
    if (name.empty() || name == "config" || name.find_first_of(" =") != std::string::npos)
      return absl::InvalidArgumentError(cat(where, " is not a flag name"));
    if (known && !known(name))
      return absl::InvalidArgumentError(cat(where, ": no such flag (--", name, ")"));
    const bool is_switch =
        std::find(flag_switches.begin(), flag_switches.end(), name) != flag_switches.end();
    if (is_switch) {
      if (!value.is_boolean())
        return absl::InvalidArgumentError(cat(where, " must be true or false"));
      if (value.get<bool>()) flags.push_back("--" + name);
      continue;
    }
    if (value.is_null()) continue;
    if (value.is_array()) {
      for (size_t i = 0; i < value.size(); ++i) {
        K3_ASSIGN_OR_RETURN(std::string v, scalar_text(value[i], cat(where, "[", i, "]")));
        flags.push_back("--" + name);
        flags.push_back(v);
      }
      continue;
    }
    K3_ASSIGN_OR_RETURN(std::string v, scalar_text(value, where));
    flags.push_back("--" + name);
    flags.push_back(v);
  }
  insert_at = std::min(insert_at, rest.size());
  rest.insert(rest.begin() + static_cast<std::ptrdiff_t>(insert_at), flags.begin(), flags.end());
  return rest;
}

std::vector<char*> to_argv(std::vector<std::string>& args) {
  std::vector<char*> out;
  for (auto& a : args) out.push_back(a.data());
  out.push_back(nullptr);
  return out;
}

}  // namespace k3::base
