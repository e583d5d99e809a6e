#include "shared/checkpoint/checkpoint.h"
#include "shared/base/json_file.h"

#include <sys/stat.h>

#include <algorithm>
#include <map>
#include <optional>
#include <set>

#include <nlohmann/json.hpp>

#include "absl/strings/str_join.h"

#include "shared/checkpoint/container.h"
#include "shared/checkpoint/model_identity.h"
#include "shared/checkpoint/model_tensors.h"
#include "shared/kernels/convert.h"

namespace k3::checkpoint {
namespace {

using json = nlohmann::json;
constexpr std::string_view kPrefix = "language_model.";

bool is_regular_file(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

// A shard name from an untrusted index: a plain file name, nothing that could
// escape the directory.
bool is_plain_file_name(std::string_view s) {
  if (s.empty() || s.size() > 255 || s == "." || s == "..") return false;
  for (char c : s)
    if (c == '/' || c == '\0') return false;
  return true;
}

}  // namespace

bool is_routed_expert_tensor(std::string_view name) {
  return name.find(".block_sparse_moe.experts.") != std::string_view::npos;
}

bool is_outside_language_model(std::string_view name, std::string_view prefix) {
  if (!prefix.empty()) return name.substr(0, prefix.size()) != prefix;
  for (std::string_view p : {"vision_tower.", "multi_modal_projector.", "mm_projector."})
    if (name.substr(0, p.size()) == p) return true;
  return false;
}

namespace {

// What the index places in one shard, for deciding whether it is needed.
struct ShardContents {
  std::vector<std::string> tensors;  // full names, sorted
  std::string first_used;            // first tensor of the text model, "" if none
  std::string first_dense;           // first text-model tensor not a routed expert's
};

// The multimodal prefix when any language-model name carries it.
std::string detect_prefix(const std::vector<std::string>& names) {
  const std::string marker = cat(kPrefix, "model.");
  for (const std::string& n : names)
    if (n.compare(0, marker.size(), marker) == 0) return std::string(kPrefix);
  return "";
}

}  // namespace

StatusOr<std::unique_ptr<Checkpoint>> Checkpoint::open(const std::string& model_dir,
                                                       const std::vector<std::string>& extra_dirs,
                                                       ShardPolicy policy) {
  std::unique_ptr<Checkpoint> ck(new Checkpoint());
  ck->model_dir_ = model_dir;
  std::vector<std::string> dirs = {model_dir};
  IdentityEvidence identity;
  dirs.insert(dirs.end(), extra_dirs.begin(), extra_dirs.end());

  // Which files, and which tensors the index says each holds.
  std::vector<std::string> names;
  std::unordered_map<std::string, std::string> weight_map;
  std::map<std::string, ShardContents> contents;
  const std::string index_path = model_dir + "/model.safetensors.index.json";
  if (is_regular_file(index_path)) {
    K3_ASSIGN_OR_RETURN(std::string text, base::read_small_file(index_path, 256u << 20));
    K3_ASSIGN_OR_RETURN(json idx, base::parse_json_file(text, index_path));
    if (!idx.is_object() || !idx.contains("weight_map") || !idx["weight_map"].is_object())
      return absl::InvalidArgumentError(cat(index_path, ": missing weight_map object"));
    std::vector<std::string> tensor_names;
    for (auto it = idx["weight_map"].begin(); it != idx["weight_map"].end(); ++it) {
      if (!it.value().is_string())
        return absl::InvalidArgumentError(
            cat(index_path, ": weight_map entry for '", it.key(), "' is not a string"));
      const std::string file = it.value().get<std::string>();
      if (!is_plain_file_name(file))
        return absl::InvalidArgumentError(cat(index_path, ": weight_map entry for '", it.key(),
                                              "' names '", file,
                                              "', which is not a plain file name"));
      weight_map[it.key()] = file;
      tensor_names.push_back(it.key());
    }
    if (weight_map.empty())
      return absl::InvalidArgumentError(cat(index_path, ": weight_map is empty"));
    const std::string prefix = detect_prefix(tensor_names);
    std::sort(tensor_names.begin(), tensor_names.end());
    for (const std::string& t : tensor_names) {
      ShardContents& sc = contents[weight_map[t]];
      sc.tensors.push_back(t);
      if (is_outside_language_model(t, prefix)) continue;
      if (sc.first_used.empty()) sc.first_used = t;
      if (sc.first_dense.empty() && !is_routed_expert_tensor(t)) sc.first_dense = t;
    }
    for (const auto& [file, sc] : contents) names.push_back(file);  // sorted (std::map)
  } else if (is_regular_file(model_dir + "/model.safetensors")) {
    names.push_back("model.safetensors");
  } else {
    return absl::NotFoundError(
        cat(model_dir, ": neither model.safetensors.index.json nor model.safetensors found"));
  }

  for (const std::string& name : names) {
    std::string found;
    for (const std::string& d : dirs) {
      std::string p = d + "/" + name;
      if (!is_regular_file(p)) continue;
      if (!found.empty())
        return absl::InvalidArgumentError(cat("shard ", name, " exists in both ", found, " and ", p,
                                              "; each shard must live in exactly one directory"));
      found = p;
    }
    if (!weight_map.empty()) {
      const ShardContents& sc = contents[name];
      // The tensor that makes this shard needed here, if any.
      const std::string& needed = policy == ShardPolicy::kAll     ? sc.first_used
                                  : policy == ShardPolicy::kDense ? sc.first_dense
                                                                  : std::string();
      if (found.empty()) {
        if (sc.first_used.empty())
          ck->missing_unused_.push_back({name, sc.tensors});
        else if (!needed.empty())
          return absl::NotFoundError(cat("shard ", name, " named by the index is missing from ",
                                         absl::StrJoin(dirs, ", "), "; it holds tensor '", needed,
                                         "', which the model uses"));
        ck->unopened_.push_back(name);
        continue;
      }
      if (policy == ShardPolicy::kDense && needed.empty()) {
        ck->unopened_.push_back(name);  // experts or the vision tower only
        continue;
      }
    } else if (found.empty()) {
      return absl::NotFoundError(cat("shard ", name, " is missing from ", model_dir));
    }
    K3_ASSIGN_OR_RETURN(base::File f, base::File::open_read(found));
    K3_ASSIGN_OR_RETURN(SafetensorsHeader h, read_safetensors_header(found));
    K3_ASSIGN_OR_RETURN(std::optional<uint64_t> stamp, read_stamp(h, found));
    if (stamp) identity.stamps.emplace_back(found, *stamp);
    const uint32_t fi = static_cast<uint32_t>(ck->files_.size());
    for (TensorInfo& t : h.tensors) {
      t.file = fi;
      if (!weight_map.empty()) {
        auto w = weight_map.find(t.name);
        if (w == weight_map.end() || w->second != name) continue;  // not this file's per index
      }
      auto [pos, inserted] = ck->by_name_.emplace(t.name, ck->tensors_.size());
      if (!inserted)
        return absl::InvalidArgumentError(cat("tensor '", t.name, "' appears in both ",
                                              ck->paths_[ck->tensors_[pos->second].file], " and ",
                                              found));
      ck->tensors_.push_back(std::move(t));
    }
    ck->paths_.push_back(found);
    ck->files_.push_back(std::move(f));
  }
  if (ck->files_.empty())
    return absl::NotFoundError(
        cat("none of the shards named by ", index_path, " is in ", absl::StrJoin(dirs, ", ")));
  std::sort(ck->unopened_.begin(), ck->unopened_.end());
  const std::set<std::string> unopened(ck->unopened_.begin(), ck->unopened_.end());
  for (const auto& [tensor, file] : weight_map) {
    if (unopened.count(file)) continue;
    if (ck->by_name_.count(tensor) == 0)
      return absl::InvalidArgumentError(
          cat("index names tensor '", tensor, "' in ", file, ", which does not hold it"));
  }
  // Detect the multimodal prefix (the real checkpoint's language-model names
  // all carry it) from any language-model tensor: a drive holding only
  // experts has no embedding to look at.
  std::vector<std::string> held;
  for (const TensorInfo& t : ck->tensors_) held.push_back(t.name);
  ck->prefix_ = detect_prefix(held);

  // The identity (shared/checkpoint/model_identity.h): the sampled embedding
  // when it is here, and every file's stamp, all agreeing.
  auto config = base::read_small_file(model_dir + "/config.json", 16u << 20);
  if (const TensorInfo* embed = ck->find(kIdentityTensor)) {
    const std::string& path = ck->paths_[embed->file];
    K3_ASSIGN_OR_RETURN(base::Hash128 sample,
                        sample_weights(ck->files_[embed->file], path, *embed));
    identity.sampled = model_fingerprint(config.ok() ? *config : std::string(), sample);
    identity.sampled_from = path;
  }
  K3_ASSIGN_OR_RETURN(ck->fingerprint_, resolve_identity(identity, model_dir));
  return ck;
}

std::vector<std::string> Checkpoint::missing_shard_warnings() const {
  std::vector<std::string> out;
  for (const MissingShard& m : missing_unused_) {
    std::string list;
    for (size_t i = 0; i < m.tensors.size() && i < 3; ++i)
      absl::StrAppend(&list, i ? ", " : "", m.tensors[i]);
    if (m.tensors.size() > 3) absl::StrAppend(&list, ", ...");
    out.push_back(cat("shard ", m.shard, " named by the index is missing; its ", m.tensors.size(),
                      " tensor(s) are not used by the model (", list, ")"));
  }
  return out;
}

Status Checkpoint::refuse_missing_shards() const {
  if (missing_unused_.empty()) return absl::OkStatus();
  std::vector<std::string> shards;
  for (const MissingShard& m : missing_unused_) shards.push_back(m.shard);
  return absl::FailedPreconditionError(cat(
      model_dir_, ": ", shards.size(), " shard(s) named by the index are missing (",
      absl::StrJoin(shards, ", "), "); they hold only tensors the model does not use (--strict)"));
}

uint64_t Checkpoint::total_bytes() const {
  uint64_t n = 0;
  for (const auto& t : tensors_) n += t.nbytes;
  return n;
}

const TensorInfo* Checkpoint::find(std::string_view name) const {
  auto it = by_name_.find(cat(prefix_, name));
  return it == by_name_.end() ? nullptr : &tensors_[it->second];
}

StatusOr<const TensorInfo*> Checkpoint::get(std::string_view name) const {
  const TensorInfo* t = find(name);
  if (t == nullptr)
    return absl::NotFoundError(
        cat(model_dir_, ": checkpoint is missing tensor '", prefix_, name, "'"));
  return t;
}

Status Checkpoint::read_bytes(const TensorInfo& t, uint64_t offset, uint64_t n, void* dst) const {
  if (offset > t.nbytes || n > t.nbytes - offset)
    return absl::OutOfRangeError(cat("read past the end of tensor '", t.name, "'"));
  return files_[t.file].pread_exact(dst, n, t.offset + offset);
}

Status Checkpoint::read_rows_f32(const TensorInfo& t, int64_t row0, int64_t nrows,
                                 float* dst) const {
  if (!is_dense_float(t.dtype))
    return absl::InvalidArgumentError(
        cat("tensor '", t.name, "' is ", dtype_name(t.dtype), ", not a float type"));
  if (row0 < 0 || nrows < 0 || row0 + nrows > t.rows())
    return absl::OutOfRangeError(cat("rows out of range for tensor '", t.name, "'"));
  const size_t es = dtype_size(t.dtype);
  const uint64_t n = static_cast<uint64_t>(nrows) * t.cols();
  const uint64_t off = static_cast<uint64_t>(row0) * t.cols() * es;
  if (t.dtype == DType::kF32) return read_bytes(t, off, n * 4, dst);
  // Stage the stored 2-byte values, then widen.
  std::vector<uint16_t> buf(n);
  K3_RETURN_IF_ERROR(read_bytes(t, off, n * 2, buf.data()));
  if (t.dtype == DType::kBF16)
    kernels::bf16_to_f32(buf.data(), dst, n);
  else
    kernels::f16_to_f32(buf.data(), dst, n);
  return absl::OkStatus();
}

StatusOr<std::vector<float>> Checkpoint::read_f32(std::string_view name) const {
  K3_ASSIGN_OR_RETURN(const TensorInfo* t, get(name));
  std::vector<float> out(static_cast<size_t>(t->numel()));
  K3_RETURN_IF_ERROR(read_rows_f32(*t, 0, t->rows(), out.data()));
  return out;
}

Status validate_checkpoint(const Checkpoint& ck, const ModelConfig& c, Required required) {
  // Each tensor through the one binder (shared/checkpoint/container.h: dtype
  // and shape, or the prepared forms of a container); a tensor not required
  // here is checked only when present.
  for (const ExpectedTensor& e : all_tensors(c)) {
    const bool expert = e.cls == TensorClass::kExpertPacked || e.cls == TensorClass::kExpertScale;
    const bool needed = required == Required::kAll || (required == Required::kDense && !expert);
    auto s = find_stored(ck, e);
    if (!s.ok()) {
      if (!needed && s.status().code() == absl::StatusCode::kNotFound) continue;
      return s.status();
    }
    if (e.role == TensorRole::kEmbed && c.tie_word_embeddings)
      K3_RETURN_IF_ERROR(find_stored(ck, e, /*tied_head=*/true).status());
  }
  return absl::OkStatus();
}

}  // namespace k3::checkpoint
