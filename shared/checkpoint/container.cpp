#include "shared/checkpoint/container.h"
#include "shared/base/json_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "shared/base/file.h"

namespace k3::checkpoint {
namespace {

using json = nlohmann::json;

std::string shape_str(const std::vector<int64_t>& s) {
  std::string out = "[";
  for (size_t i = 0; i < s.size(); ++i) absl::StrAppend(&out, i ? ", " : "", s[i]);
  return out + "]";
}

std::string found_str(const TensorInfo& t) {
  return cat(dtype_name(t.dtype), " ", shape_str(t.shape));
}

Status mismatch(const Checkpoint& ck, const TensorInfo& t, const std::string& expected) {
  return absl::InvalidArgumentError(cat(ck.files()[t.file], ": tensor '", t.name, "': expected ",
                                        expected, ", found ", found_str(t)));
}

// Checks one stored tensor's dtype and shape.
Status expect(const Checkpoint& ck, const TensorInfo& t, DType dtype,
              const std::vector<int64_t>& shape) {
  if (t.dtype != dtype || t.shape != shape)
    return mismatch(ck, t, cat(dtype_name(dtype), " ", shape_str(shape)));
  return absl::OkStatus();
}

bool valid_bits(int b) {
  return b == 4 || b == 8 || b == 32;
}

}  // namespace

int ContainerInfo::bits_for(QuantGroup g) const {
  switch (g) {
    case QuantGroup::kDense:
      return dense_bits;
    case QuantGroup::kMla:
      return mla_bits;
    case QuantGroup::kHead:
      return head_bits;
    case QuantGroup::kNone:
      break;
  }
  return 32;
}

std::string ContainerInfo::to_json() const {
  char fp[17];
  std::snprintf(fp, sizeof fp, "%016" PRIx64, fingerprint);
  return json({{"format", "k3serve-container"},
               {"version", 1},
               {"dense_bits", dense_bits},
               {"mla_bits", mla_bits},
               {"head_bits", head_bits},
               {"dense_only", dense_only},
               {"shards", shards},
               {"fingerprint", fp}})
             .dump(1) +
         "\n";
}

StatusOr<std::optional<ContainerInfo>> read_container_info(const std::string& dir) {
  const std::string path = dir + "/" + kContainerFile;
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) return std::optional<ContainerInfo>();
  K3_ASSIGN_OR_RETURN(std::string text, base::read_small_file(path, 1u << 20));
  K3_ASSIGN_OR_RETURN(json j, base::parse_json_file(text, path));
  auto bad = [&](const std::string& what) {
    return absl::InvalidArgumentError(cat(path, ": ", what));
  };
  if (!j.is_object()) return bad("not a JSON object");
  auto str = [&](const char* key) {
    return j.contains(key) && j[key].is_string() ? j[key].get<std::string>() : std::string();
  };
  if (str("format") != "k3serve-container") return bad("format is not k3serve-container");
  if (!j.contains("version") || !j["version"].is_number_integer() || j["version"] != 1)
    return bad("unsupported version (this build reads version 1)");
  ContainerInfo c;
  for (auto [key, field] :
       {std::pair{"dense_bits", &c.dense_bits}, std::pair{"mla_bits", &c.mla_bits},
        std::pair{"head_bits", &c.head_bits}}) {
    if (!j.contains(key) || !j[key].is_number_integer() || !valid_bits(j[key].get<int>()))
      return bad(cat(key, " must be 4, 8 or 32"));
    *field = j[key].get<int>();
  }
  if (!j.contains("dense_only") || !j["dense_only"].is_boolean()) return bad("dense_only missing");
  c.dense_only = j["dense_only"].get<bool>();
  if (!j.contains("shards") || !j["shards"].is_number_integer() || j["shards"].get<int64_t>() < 1)
    return bad("shards must be a positive integer");
  c.shards = j["shards"].get<int64_t>();
  const std::string fp = str("fingerprint");
  if (fp.size() != 16 || fp.find_first_not_of("0123456789abcdef") != std::string::npos)
    return bad("fingerprint must be 16 lower-case hex digits");
  c.fingerprint = std::stoull(fp, nullptr, 16);
  return std::optional<ContainerInfo>(c);
}

std::string quantized_name(const std::string& name, int bits) {
  return cat(name, bits == 8 ? ".q8" : ".q4");
}
std::string quantized_scale_name(const std::string& name, int bits) {
  return cat(name, bits == 8 ? ".q8_scale" : ".q4_scale");
}

StatusOr<StoredTensor> find_stored(const Checkpoint& ck, const ExpectedTensor& e, bool tied_head) {
  StoredTensor s;
  if (e.cls == TensorClass::kExpertPacked || e.cls == TensorClass::kExpertScale) {
    K3_ASSIGN_OR_RETURN(s.data, ck.get(e.name));
    s.form = StoredTensor::Form::kExpert;
    K3_RETURN_IF_ERROR(expect(ck, *s.data, DType::kU8, e.shape));
    return s;
  }
  if ((e.quant != QuantGroup::kNone || tied_head) && e.shape.size() == 2) {
    const int64_t rows = e.shape[0], cols = e.shape[1], groups = (cols + 63) / 64;
    const TensorInfo* q8 = ck.find(quantized_name(e.name, 8));
    const TensorInfo* q4 = ck.find(quantized_name(e.name, 4));
    if (q8 != nullptr && q4 != nullptr)
      return absl::InvalidArgumentError(
          cat(ck.model_dir(), ": tensor '", e.name, "' is stored both as int8 and as int4"));
    if (q8 != nullptr || q4 != nullptr) {
      const int bits = q8 != nullptr ? 8 : 4;
      s.form = bits == 8 ? StoredTensor::Form::kQ8 : StoredTensor::Form::kQ4;
      s.data = bits == 8 ? q8 : q4;
      K3_ASSIGN_OR_RETURN(s.scales, ck.get(quantized_scale_name(e.name, bits)));
      if (bits == 8) {
        K3_RETURN_IF_ERROR(expect(ck, *s.data, DType::kI8, {rows, cols}));
        K3_RETURN_IF_ERROR(expect(ck, *s.scales, DType::kF32, {rows}));
      } else {
        K3_RETURN_IF_ERROR(expect(ck, *s.data, DType::kU8, {rows, groups * 32}));
        K3_RETURN_IF_ERROR(expect(ck, *s.scales, DType::kF32, {rows, groups}));
      }
      return s;
    }
  }
  K3_ASSIGN_OR_RETURN(s.data, ck.get(e.name));
  const TensorInfo& t = *s.data;
  if (e.cls == TensorClass::kALog) {
    // Stored zero-padded beyond the head count (96 heads stored as [128]).
    if (!is_dense_float(t.dtype) || t.shape.size() != 1 || t.shape[0] < e.shape[0])
      return mismatch(
          ck, t,
          cat("BF16, F16 or F32 [n] with n >= ", e.shape[0], " (linear_attn_config.num_heads)"));
    return s;
  }
  if (!is_dense_float(t.dtype) || t.shape != e.shape) {
    std::string forms = cat("BF16, F16 or F32 ", shape_str(e.shape));
    if (e.quant != QuantGroup::kNone) absl::StrAppend(&forms, " (or its .q8 / .q4 form)");
    return mismatch(ck, t, forms);
  }
  return s;
}

Status check_tensors(const Checkpoint& ck, const ModelConfig& c, bool experts,
                     std::set<std::string>* used) {
  auto note = [&](const StoredTensor& s) {
    if (used == nullptr) return;
    used->insert(s.data->name);
    if (s.scales != nullptr) used->insert(s.scales->name);
  };
  for (const ExpectedTensor& e : experts ? all_tensors(c) : dense_tensors(c)) {
    K3_ASSIGN_OR_RETURN(StoredTensor s, find_stored(ck, e));
    note(s);
    if (e.role == TensorRole::kEmbed && c.tie_word_embeddings) {
      K3_ASSIGN_OR_RETURN(StoredTensor head, find_stored(ck, e, /*tied_head=*/true));
      note(head);
    }
  }
  return absl::OkStatus();
}

std::vector<std::string> unused_tensors(const Checkpoint& ck, const std::set<std::string>& used) {
  std::vector<std::string> out;
  for (const TensorInfo& t : ck.tensors())
    if (used.count(t.name) == 0 && !is_outside_language_model(t.name, ck.prefix()))
      out.push_back(t.name);
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace k3::checkpoint
