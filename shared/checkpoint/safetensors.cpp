#include "shared/checkpoint/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <nlohmann/json.hpp>
#include <unordered_set>

#include "shared/base/file.h"

namespace k3::checkpoint {
namespace {

using json = nlohmann::json;

std::string quote_name(std::string_view s) {
  // Names come from untrusted files: print them bounded and without control bytes.
  std::string out = "'";
  size_t n = 0;
  for (char c : s) {
    if (++n > 200) {
      out += "...";
      break;
    }
    out += (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) ? '?' : c;
  }
  return out + "'";
}

Status tensor_error(std::string_view label, std::string_view name, std::string_view what) {
  return absl::InvalidArgumentError(cat(label, ": tensor ", quote_name(name), ": ", what));
}

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

// Reads a non-negative JSON integer into `out`.
bool json_u64(const json& v, uint64_t* out) {
  if (v.is_number_unsigned()) {
    *out = v.get<uint64_t>();
    return true;
  }
  if (v.is_number_integer()) {
    int64_t s = v.get<int64_t>();
    if (s < 0) return false;
    *out = static_cast<uint64_t>(s);
    return true;
  }
  return false;
}

}  // namespace

int64_t TensorInfo::numel() const {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  return n;
}

int64_t TensorInfo::rows() const {
  return shape.empty() ? 1 : (shape.size() == 1 ? 1 : shape[0]);
}

int64_t TensorInfo::cols() const {
  if (shape.empty()) return 1;
  if (shape.size() == 1) return shape[0];
  int64_t n = 1;
  for (size_t i = 1; i < shape.size(); ++i) n *= shape[i];
  return n;
}

StatusOr<SafetensorsHeader> parse_safetensors_header(std::string_view text, uint64_t data_start,
                                                     uint64_t file_size, std::string_view label) {
  if (data_start > file_size)
    return absl::InvalidArgumentError(cat(label, ": header extends past end of file"));
  // Duplicate keys are legal JSON but ambiguous here: detect them while parsing
  // (nlohmann would silently keep the last one).
  std::unordered_set<std::string> seen;
  std::string duplicate;
  auto callback = [&](int depth, json::parse_event_t event, json& parsed) {
    if (depth == 1 && event == json::parse_event_t::key && duplicate.empty()) {
      const std::string& key = parsed.get_ref<const std::string&>();
      if (!seen.insert(key).second) duplicate = key;
    }
    return true;
  };
  json root;
  try {
    root = json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(cat(label, ": header is not valid JSON (", e.what(), ")"));
  }
  if (!duplicate.empty()) return tensor_error(label, duplicate, "name appears twice in the header");
  if (!root.is_object())
    return absl::InvalidArgumentError(cat(label, ": header is not a JSON object"));

  SafetensorsHeader h;
  h.data_start = data_start;
  h.file_size = file_size;
  const uint64_t data_size = file_size - data_start;
  for (auto it = root.begin(); it != root.end(); ++it) {
    const std::string& name = it.key();
    const json& v = it.value();
    if (name == "__metadata__") {
      if (!v.is_object())
        return absl::InvalidArgumentError(cat(label, ": __metadata__ is not an object"));
      for (auto m = v.begin(); m != v.end(); ++m) {
        if (!m.value().is_string())
          return absl::InvalidArgumentError(
              cat(label, ": __metadata__ value ", quote_name(m.key()), " is not a string"));
        h.metadata[m.key()] = m.value().get<std::string>();
      }
      continue;
    }
    if (name.empty()) return tensor_error(label, name, "empty tensor name");
    if (!v.is_object()) return tensor_error(label, name, "entry is not an object");
    auto dt = v.find("dtype");
    auto sh = v.find("shape");
    auto off = v.find("data_offsets");
    if (dt == v.end() || !dt->is_string()) return tensor_error(label, name, "missing dtype");
    if (sh == v.end() || !sh->is_array()) return tensor_error(label, name, "missing shape");
    if (off == v.end() || !off->is_array() || off->size() != 2)
      return tensor_error(label, name, "data_offsets must be [begin, end]");
    TensorInfo t;
    t.name = name;
    auto dtype = dtype_from_name(dt->get<std::string>());
    if (!dtype)
      return tensor_error(label, name, cat("unknown dtype ", quote_name(dt->get<std::string>())));
    t.dtype = *dtype;
    if (sh->size() > kMaxTensorRank)
      return tensor_error(label, name, cat("rank ", sh->size(), " exceeds ", kMaxTensorRank));
    uint64_t numel = 1;
    for (const json& d : *sh) {
      uint64_t dim;
      if (!json_u64(d, &dim) || dim > static_cast<uint64_t>(INT64_MAX))
        return tensor_error(label, name, "shape entries must be non-negative integers");
      if (mul_overflows(numel, dim, &numel))
        return tensor_error(label, name, "shape product overflows");
      t.shape.push_back(static_cast<int64_t>(dim));
    }
    uint64_t nbytes;
    if (mul_overflows(numel, dtype_size(t.dtype), &nbytes) ||
        nbytes > static_cast<uint64_t>(INT64_MAX))
      return tensor_error(label, name, "byte size overflows");
    uint64_t begin, end;
    if (!json_u64((*off)[0], &begin) || !json_u64((*off)[1], &end))
      return tensor_error(label, name, "data_offsets must be non-negative integers");
    if (begin > end) return tensor_error(label, name, "data_offsets begin > end");
    if (end > data_size)
      return tensor_error(label, name,
                          cat("data_offsets [", begin, ", ", end,
                              ") extend past the end of the data region (", data_size, " bytes)"));
    if (end - begin != nbytes)
      return tensor_error(label, name,
                          cat("data_offsets span ", end - begin, " bytes but ", dtype_name(t.dtype),
                              " shape needs ", nbytes));
    t.offset = data_start + begin;
    t.nbytes = nbytes;
    h.tensors.push_back(std::move(t));
  }
  std::sort(h.tensors.begin(), h.tensors.end(), [](const TensorInfo& a, const TensorInfo& b) {
    return a.offset != b.offset ? a.offset < b.offset : a.nbytes < b.nbytes;
  });
  for (size_t i = 1; i < h.tensors.size(); ++i) {
    const TensorInfo& prev = h.tensors[i - 1];
    const TensorInfo& cur = h.tensors[i];
    if (cur.nbytes != 0 && prev.nbytes != 0 && cur.offset < prev.offset + prev.nbytes)
      return tensor_error(label, cur.name, cat("overlaps tensor ", quote_name(prev.name)));
  }
  return h;
}

StatusOr<SafetensorsHeader> parse_safetensors_image(std::string_view image,
                                                    std::string_view label) {
  if (image.size() < 8)
    return absl::InvalidArgumentError(
        cat(label, ": file is ", image.size(), " bytes, too short for a safetensors header"));
  uint64_t n;
  std::memcpy(&n, image.data(), 8);  // little-endian hosts only (x86_64, aarch64)
  if (n > kMaxSafetensorsHeader)
    return absl::InvalidArgumentError(
        cat(label, ": header length ", n, " exceeds the limit of ", kMaxSafetensorsHeader));
  if (n > image.size() - 8)
    return absl::InvalidArgumentError(
        cat(label, ": header length ", n, " extends past end of file (", image.size(), " bytes)"));
  return parse_safetensors_header(image.substr(8, n), 8 + n, image.size(), label);
}

StatusOr<SafetensorsHeader> read_safetensors_header(const std::string& path) {
  K3_ASSIGN_OR_RETURN(base::File f, base::File::open_read(path));
  const uint64_t size = f.size();
  if (size < 8)
    return absl::InvalidArgumentError(
        cat(path, ": file is ", size, " bytes, too short for a safetensors header"));
  uint64_t n;
  K3_RETURN_IF_ERROR(f.pread_exact(&n, 8, 0));
  if (n > kMaxSafetensorsHeader)
    return absl::InvalidArgumentError(
        cat(path, ": header length ", n, " exceeds the limit of ", kMaxSafetensorsHeader));
  if (n > size - 8)
    return absl::InvalidArgumentError(
        cat(path, ": header length ", n, " extends past end of file (", size, " bytes)"));
  std::string text(n, '\0');
  K3_RETURN_IF_ERROR(f.pread_exact(text.data(), n, 8));
  return parse_safetensors_header(text, 8 + n, size, path);
}

}  // namespace k3::checkpoint
