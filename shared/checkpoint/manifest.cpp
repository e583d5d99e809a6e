#include "shared/checkpoint/manifest.h"
#include "shared/base/json_file.h"

#include <cstdio>

#include <nlohmann/json.hpp>

#include "shared/base/file.h"
#include "shared/base/hash.h"

namespace k3::checkpoint {
namespace {

using json = nlohmann::json;

constexpr size_t kMaxManifestBytes = 1ull << 30;  // ~5 M entries
constexpr size_t kMaxLineBytes = 4096;

StatusOr<uint64_t> parse_hex64(const json& v, std::string_view where, const char* field) {
  if (!v.is_string() || v.get<std::string>().size() != 16)
    return absl::InvalidArgumentError(cat(where, ": \"", field, "\" must be 16 hex digits"));
  uint64_t out = 0;
  for (char c : v.get<std::string>()) {
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : -1;
    if (d < 0)
      return absl::InvalidArgumentError(cat(where, ": \"", field, "\" must be 16 hex digits"));
    out = (out << 4) | static_cast<uint64_t>(d);
  }
  return out;
}

StatusOr<json> parse_object(std::string_view line, std::string_view where) {
  if (line.size() > kMaxLineBytes)
    return absl::InvalidArgumentError(cat(where, ": line longer than ", kMaxLineBytes, " bytes"));
  K3_ASSIGN_OR_RETURN(json j, base::parse_json_file(line, where));
  if (!j.is_object()) return absl::InvalidArgumentError(cat(where, ": not a JSON object"));
  return j;
}

StatusOr<uint64_t> get_count(const json& j, const char* field, std::string_view where) {
  auto it = j.find(field);
  if (it == j.end() || !it->is_number_unsigned())
    return absl::InvalidArgumentError(
        cat(where, ": \"", field, "\" must be a non-negative integer"));
  return it->get<uint64_t>();
}

Status only_keys(const json& j, std::initializer_list<const char*> keys, std::string_view where) {
  for (auto it = j.begin(); it != j.end(); ++it) {
    bool known = false;
    for (const char* k : keys) known |= it.key() == k;
    if (!known) return absl::InvalidArgumentError(cat(where, ": unknown field \"", it.key(), "\""));
  }
  return absl::OkStatus();
}

}  // namespace

std::string manifest_header_line(const ManifestHeader& h) {
  json j = {{"k3_manifest", kManifestVersion},
            {"hash", "xxh3-128"},
            {"model_fingerprint", base::hex64(h.fingerprint)},
            {"entries", h.entries}};
  return j.dump();
}

std::string manifest_entry_line(const ManifestEntry& e) {
  // Key order fixed by hand (nlohmann sorts object keys): the kind first.
  std::string out;
  if (e.kind == ManifestEntry::Kind::kTensor) {
    out = "{\"tensor\":" + json(e.name).dump() + ",\"dtype\":" + json(e.dtype).dump() +
          ",\"shape\":" + json(e.shape).dump();
  } else {
    out = "{\"expert\":" + json(e.name).dump() + ",\"layer\":" + std::to_string(e.layer) +
          ",\"id\":" + std::to_string(e.id);
  }
  out += ",\"bytes\":" + std::to_string(e.bytes) + ",\"xxh3_128\":\"" + e.hash.hex() + "\"}";
  return out;
}

StatusOr<ManifestHeader> parse_manifest_header(std::string_view line, std::string_view where) {
  K3_ASSIGN_OR_RETURN(json j, parse_object(line, where));
  K3_RETURN_IF_ERROR(only_keys(j, {"k3_manifest", "hash", "model_fingerprint", "entries"}, where));
  if (j.contains("k3_manifest") && j["k3_manifest"] == 1)
    return absl::FailedPreconditionError(
        cat(where,
            ": a manifest of version 1, whose model fingerprint did not cover the weights; "
            "run k3ctl manifest again"));
  if (!j.contains("k3_manifest") || j["k3_manifest"] != kManifestVersion)
    return absl::InvalidArgumentError(cat(
        where, ": not a k3 manifest header (\"k3_manifest\": ", kManifestVersion, " expected)"));
  if (!j.contains("hash") || j["hash"] != "xxh3-128")
    return absl::InvalidArgumentError(cat(where, ": \"hash\" must be \"xxh3-128\""));
  ManifestHeader h;
  if (!j.contains("model_fingerprint"))
    return absl::InvalidArgumentError(cat(where, ": \"model_fingerprint\" is missing"));
  K3_ASSIGN_OR_RETURN(h.fingerprint,
                      parse_hex64(j["model_fingerprint"], where, "model_fingerprint"));
  K3_ASSIGN_OR_RETURN(h.entries, get_count(j, "entries", where));
  return h;
}

StatusOr<ManifestEntry> parse_manifest_entry(std::string_view line, std::string_view where) {
  K3_ASSIGN_OR_RETURN(json j, parse_object(line, where));
  ManifestEntry e;
  auto name_of = [&](const char* field) -> Status {
    const json& v = j[field];
    if (!v.is_string() || v.get<std::string>().empty() || v.get<std::string>().size() > 1024)
      return absl::InvalidArgumentError(cat(where, ": \"", field, "\" must be a name"));
    e.name = v.get<std::string>();
    return absl::OkStatus();
  };
  if (j.contains("tensor")) {
    K3_RETURN_IF_ERROR(only_keys(j, {"tensor", "dtype", "shape", "bytes", "xxh3_128"}, where));
    e.kind = ManifestEntry::Kind::kTensor;
    K3_RETURN_IF_ERROR(name_of("tensor"));
    if (!j.contains("dtype") || !j["dtype"].is_string() || j["dtype"].get<std::string>().empty() ||
        j["dtype"].get<std::string>().size() > 16)
      return absl::InvalidArgumentError(cat(where, ": \"dtype\" must be a dtype name"));
    e.dtype = j["dtype"].get<std::string>();
    if (!j.contains("shape") || !j["shape"].is_array() || j["shape"].size() > 8)
      return absl::InvalidArgumentError(cat(where, ": \"shape\" must be an array of dimensions"));
    for (const json& d : j["shape"]) {
      if (!d.is_number_unsigned())
        return absl::InvalidArgumentError(
            cat(where, ": \"shape\" must hold non-negative integers"));
      e.shape.push_back(d.get<int64_t>());
    }
  } else if (j.contains("expert")) {
    K3_RETURN_IF_ERROR(only_keys(j, {"expert", "layer", "id", "bytes", "xxh3_128"}, where));
    e.kind = ManifestEntry::Kind::kExpert;
    K3_RETURN_IF_ERROR(name_of("expert"));
    K3_ASSIGN_OR_RETURN(uint64_t layer, get_count(j, "layer", where));
    K3_ASSIGN_OR_RETURN(uint64_t id, get_count(j, "id", where));
    if (layer > 1u << 20 || id > 1u << 20)
      return absl::InvalidArgumentError(cat(where, ": \"layer\" or \"id\" out of range"));
    e.layer = static_cast<int64_t>(layer);
    e.id = static_cast<int64_t>(id);
  } else {
    return absl::InvalidArgumentError(cat(where, ": neither a \"tensor\" nor an \"expert\" entry"));
  }
  K3_ASSIGN_OR_RETURN(e.bytes, get_count(j, "bytes", where));
  const json& h = j["xxh3_128"];
  auto hash = h.is_string() ? base::Hash128::from_hex(h.get<std::string>()) : std::nullopt;
  if (!hash) return absl::InvalidArgumentError(cat(where, ": \"xxh3_128\" must be 32 hex digits"));
  e.hash = *hash;
  return e;
}

StatusOr<Manifest> Manifest::load(const std::string& path) {
  K3_ASSIGN_OR_RETURN(std::string text, base::read_small_file(path, kMaxManifestBytes));
  return parse(text, path);
}

StatusOr<Manifest> Manifest::parse(std::string_view text, std::string_view label) {
  Manifest m;
  size_t pos = 0, line_no = 0;
  bool have_header = false;
  while (pos < text.size()) {
    const size_t nl = text.find('\n', pos);
    ++line_no;
    const std::string where = cat(label, ":", line_no);
    if (nl == std::string_view::npos)
      return absl::InvalidArgumentError(
          cat(where, ": the last line does not end in a newline (truncated manifest?)"));
    const std::string_view line = text.substr(pos, nl - pos);
    pos = nl + 1;
    if (!have_header) {
      K3_ASSIGN_OR_RETURN(m.header_, parse_manifest_header(line, where));
      have_header = true;
      continue;
    }
    K3_ASSIGN_OR_RETURN(ManifestEntry e, parse_manifest_entry(line, where));
    const size_t i = m.entries_.size();
    const bool fresh = e.kind == ManifestEntry::Kind::kTensor
                           ? m.tensors_.emplace(e.name, i).second
                           : m.experts_.emplace(std::make_pair(e.layer, e.id), i).second;
    if (!fresh) return absl::InvalidArgumentError(cat(where, ": a second entry for ", e.name));
    m.entries_.push_back(std::move(e));
  }
  if (!have_header) return absl::InvalidArgumentError(cat(label, ": empty manifest"));
  if (m.entries_.size() != m.header_.entries)
    return absl::InvalidArgumentError(cat(label, ": the header announces ", m.header_.entries,
                                          " entries, the file holds ", m.entries_.size(),
                                          " (truncated manifest?)"));
  return m;
}

const ManifestEntry* Manifest::tensor(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &entries_[it->second];
}

const ManifestEntry* Manifest::expert(int64_t layer, int64_t id) const {
  auto it = experts_.find({layer, id});
  return it == experts_.end() ? nullptr : &entries_[it->second];
}

}  // namespace k3::checkpoint
