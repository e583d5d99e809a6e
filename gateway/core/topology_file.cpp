#include "gateway/core/topology_file.h"

#include <nlohmann/json.hpp>

#include "shared/base/host_port.h"
#include "shared/base/json_file.h"
#include "shared/shm/segment.h"

namespace k3::gateway {

namespace {

using nlohmann::json;

bool valid_name(const std::string& n) {
  if (n.empty() || n.size() > 64) return false;
  for (char c : n)
    if (!(std::isalnum(static_cast<unsigned char>(c)) || c == '.' || c == '_' || c == '-' ||
          c == ':' || c == '[' || c == ']'))
      return false;
  return true;
}

// HOST:PORT with a port in [1, 65535] (a storage host listens on a fixed
// port: 0 would mean "any" there and nothing here).
bool valid_host_port(const std::string& a) {
  if (a.size() > 255) return false;
  for (char c : a)
    if (std::isspace(static_cast<unsigned char>(c)) || c == '/' || c == '=' || c == ',' ||
        !std::isprint(static_cast<unsigned char>(c)))
      return false;
  return base::parse_host_port(a, /*min_port=*/1).ok();
}

bool absolute_path(const std::string& p) {
  return p.size() > 1 && p.front() == '/' && p.find('\0') == std::string::npos;
}

Status refuse(const std::string& where, std::string_view what) {
  return absl::InvalidArgumentError(cat(where, what));
}

// The keys of `e` must all be in `known`.
Status only_keys(const json& e, const std::string& where,
                 std::initializer_list<std::string_view> known) {
  for (auto it = e.begin(); it != e.end(); ++it) {
    bool ok = false;
    for (std::string_view k : known) ok = ok || it.key() == k;
    if (!ok) return refuse(where, cat(": unknown field \"", it.key(), "\""));
  }
  return absl::OkStatus();
}

StatusOr<std::string> string_field(const json& e, const std::string& where, const char* key,
                                   bool required) {
  if (!e.contains(key)) {
    if (required) return refuse(where, cat(".", key, " is required"));
    return std::string();
  }
  if (!e[key].is_string() || e[key].get<std::string>().empty())
    return refuse(where, cat(".", key, " must be a non-empty string"));
  return e[key].get<std::string>();
}

Status parse_local(const json& list, std::string_view origin, std::vector<ExpertdEntry>* out) {
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& e = list[i];
    const std::string where = cat(origin, ": expertd[", i, "]");
    if (!e.is_object()) return refuse(where, " must be an object");
    K3_RETURN_IF_ERROR(only_keys(e, where, {"name", "address", "segment"}));
    if (!e.contains("address") || !e["address"].is_string() ||
        e["address"].get<std::string>().empty())
      return refuse(where, ".address must be a non-empty string");
    ExpertdEntry x;
    x.address = e["address"].get<std::string>();
    if (e.contains("name")) {
      if (!e["name"].is_string()) return refuse(where, ".name must be a string");
      x.name = e["name"].get<std::string>();
    }
    if (e.contains("segment")) {
      if (!e["segment"].is_string() || !shm::valid_segment_ref(e["segment"].get<std::string>()))
        return refuse(where, ".segment must be a segment name or an absolute DIR/NAME path");
      x.segment = e["segment"].get<std::string>();
    }
    if (x.name.empty()) x.name = x.address;
    for (const auto& prev : *out)
      if (prev.address == x.address || prev.name == x.name)
        return refuse(where, cat(" repeats ", x.name, " / ", x.address));
    out->push_back(std::move(x));
  }
  return absl::OkStatus();
}

Status parse_remote(const json& list, std::string_view origin, TopologyFile* out) {
  for (size_t i = 0; i < list.size(); ++i) {
    const auto& e = list[i];
    const std::string where = cat(origin, ": remote_expertd[", i, "]");
    if (!e.is_object()) return refuse(where, " must be an object");
    K3_RETURN_IF_ERROR(only_keys(
        e, where,
        {"name", "address", "tls_ca", "tls_cert", "tls_key", "auth_token_file", "insecure"}));
    RemoteExpertdEntry x;
    K3_ASSIGN_OR_RETURN(x.address, string_field(e, where, "address", true));
    if (!valid_host_port(x.address))
      return refuse(where, cat(".address '", x.address, "' is not HOST:PORT (port 1..65535)"));
    K3_ASSIGN_OR_RETURN(x.name, string_field(e, where, "name", false));
    if (x.name.empty()) x.name = x.address;
    if (!valid_name(x.name))
      return refuse(
          where, cat(".name '", x.name,
                     "' must be 1-64 characters of letters, digits, '.', '_', '-', ':', '[', ']'"));
    for (const auto& [key, field] :
         {std::pair{"tls_ca", &x.tls_ca}, std::pair{"tls_cert", &x.tls_cert},
          std::pair{"tls_key", &x.tls_key}, std::pair{"auth_token_file", &x.auth_token_file}}) {
      K3_ASSIGN_OR_RETURN(*field, string_field(e, where, key, false));
      if (!field->empty() && !absolute_path(*field))
        return refuse(where, cat(".", key, " must be an absolute path (engined reads it)"));
    }
    if (e.contains("insecure")) {
      if (!e["insecure"].is_boolean()) return refuse(where, ".insecure must be true or false");
      x.insecure = e["insecure"].get<bool>();
    }
    const bool tls = !x.tls_ca.empty() || !x.tls_cert.empty() || !x.tls_key.empty();
    if (x.insecure && tls) return refuse(where, ": insecure and tls_* exclude each other");
    if (!x.insecure && x.tls_ca.empty())
      return refuse(where, ".tls_ca is required (or \"insecure\": true for plaintext)");
    if (!x.insecure && x.auth_token_file.empty())
      return refuse(where, ".auth_token_file is required (or \"insecure\": true)");
    if (x.tls_cert.empty() != x.tls_key.empty())
      return refuse(where, ": tls_cert and tls_key go together");
    for (const auto& prev : out->remote_expertd)
      if (prev.address == x.address || prev.name == x.name)
        return refuse(where, cat(" repeats ", x.name, " / ", x.address));
    for (const auto& prev : out->expertd)
      if (prev.name == x.name) return refuse(where, cat(".name '", x.name, "' names an expertd"));
    out->remote_expertd.push_back(std::move(x));
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<TopologyFile> parse_topology(std::string_view text, std::string_view origin) {
  K3_ASSIGN_OR_RETURN(json j, base::parse_json_file(text, origin));
  const char* shape = ": expected {\"expertd\": [...], \"remote_expertd\": [...]}";
  if (!j.is_object()) return absl::InvalidArgumentError(cat(origin, shape));
  K3_RETURN_IF_ERROR(only_keys(j, std::string(origin), {"expertd", "remote_expertd"}));
  const bool local = j.contains("expertd"), remote = j.contains("remote_expertd");
  if ((!local && !remote) || (local && !j["expertd"].is_array()) ||
      (remote && !j["remote_expertd"].is_array()))
    return absl::InvalidArgumentError(cat(origin, shape));
  TopologyFile out;
  if (local) K3_RETURN_IF_ERROR(parse_local(j["expertd"], origin, &out.expertd));
  if (remote) K3_RETURN_IF_ERROR(parse_remote(j["remote_expertd"], origin, &out));
  return out;
}

}  // namespace k3::gateway
