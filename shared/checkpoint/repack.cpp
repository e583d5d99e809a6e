#include "shared/checkpoint/repack.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>

#include "shared/base/hash.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/container.h"
#include "shared/checkpoint/expert_index.h"
#include "shared/checkpoint/model_identity.h"
#include "shared/checkpoint/model_tensors.h"
#include "shared/checkpoint/safetensors.h"
#include "shared/checkpoint/safetensors_writer.h"
#include "shared/kernels/dense.h"

namespace k3::checkpoint {
namespace {

using Clock = std::chrono::steady_clock;

// How one output tensor is made.
struct Piece {
  enum class Kind { kCopy, kF32, kQ8, kQ4, kScales } kind = Kind::kCopy;
  const TensorInfo* src = nullptr;  // the source tensor (kScales: unused)
  int64_t rows = 0, cols = 0;
};

struct ShardPlan {
  std::vector<SafetensorsWriter::Entry> entries;
  std::vector<Piece> pieces;  // one per entry
  uint64_t bytes = 0;
  int64_t moe_layer = -1;  // expert shards
};

uint64_t entry_bytes(const SafetensorsWriter::Entry& e) {
  uint64_t n = dtype_size(e.dtype);
  for (int64_t d : e.shape) n *= static_cast<uint64_t>(d);
  return n;
}

void add(ShardPlan* p, SafetensorsWriter::Entry e, Piece piece) {
  p->bytes += entry_bytes(e);
  p->entries.push_back(std::move(e));
  p->pieces.push_back(piece);
}

// A quantized matrix: data then scales, both produced by one pass over the
// source rows (the scales wait in memory: rows * groups floats).
void add_quantized(ShardPlan* p, const std::string& full, const TensorInfo* src, int bits,
                   int64_t rows, int64_t cols) {
  const int64_t groups = (cols + 63) / 64;
  if (bits == 8) {
    add(p, {quantized_name(full, 8), DType::kI8, {rows, cols}},
        {Piece::Kind::kQ8, src, rows, cols});
    add(p, {quantized_scale_name(full, 8), DType::kF32, {rows}},
        {Piece::Kind::kScales, src, rows, cols});
  } else {
    add(p, {quantized_name(full, 4), DType::kU8, {rows, groups * 32}},
        {Piece::Kind::kQ4, src, rows, cols});
    add(p, {quantized_scale_name(full, 4), DType::kF32, {rows, groups}},
        {Piece::Kind::kScales, src, rows, cols});
  }
}

StatusOr<ShardPlan> plan_dense(const Checkpoint& ck, const ModelConfig& c,
                               const ContainerInfo& info) {
  ShardPlan p;
  for (const ExpectedTensor& e : dense_tensors(c)) {
    K3_ASSIGN_OR_RETURN(StoredTensor s, find_stored(ck, e));
    const TensorInfo* t = s.data;
    const int bits = info.bits_for(e.quant);
    if (e.quant == QuantGroup::kNone) {
      add(&p, {t->name, t->dtype, t->shape}, {Piece::Kind::kCopy, t});
    } else if (bits == 32) {
      add(&p, {t->name, DType::kF32, t->shape}, {Piece::Kind::kF32, t, t->rows(), t->cols()});
    } else {
      add_quantized(&p, t->name, t, bits, t->rows(), t->cols());
    }
    if (e.role == TensorRole::kEmbed && c.tie_word_embeddings && info.head_bits != 32)
      add_quantized(&p, t->name, t, info.head_bits, t->rows(), t->cols());
  }
  return p;
}

StatusOr<ShardPlan> plan_experts(const Checkpoint& ck, const ModelConfig& c, int64_t layer) {
  ShardPlan p;
  p.moe_layer = layer;
  for (int64_t x = 0; x < c.num_experts; ++x) {
    for (const ExpectedTensor& e : expert_tensors(c, layer, x)) {
      K3_ASSIGN_OR_RETURN(StoredTensor s, find_stored(ck, e));
      add(&p, {s.data->name, DType::kU8, s.data->shape}, {Piece::Kind::kCopy, s.data});
    }
  }
  return p;
}

std::string shard_name(int64_t i, int64_t n) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "model-%05" PRId64 "-of-%05" PRId64 ".safetensors", i, n);
  return buf;
}

bool exists(const std::string& p) {
  struct stat st;
  return ::stat(p.c_str(), &st) == 0;
}

// An exclusive lock on DIR/.k3repack.lock for the life of the object.
class DirLock {
 public:
  static StatusOr<DirLock> acquire(const std::string& dir) {
    DirLock l;
    const std::string path = dir + "/.k3repack.lock";
    l.fd_ = ::open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0644);
    if (l.fd_ < 0) return absl::InternalError(cat(path, ": ", std::strerror(errno)));
    if (::flock(l.fd_, LOCK_EX) != 0)
      return absl::InternalError(cat(path, ": flock: ", std::strerror(errno)));
    return l;
  }
  DirLock(DirLock&& o) noexcept : fd_(o.fd_) { o.fd_ = -1; }
  ~DirLock() {
    if (fd_ >= 0) ::close(fd_);
  }

 private:
  DirLock() = default;
  int fd_ = -1;
};

// A shard already at its final name: complete. Kept when its header is the
// plan's; anything else is another repack's file and refused.
StatusOr<bool> shard_complete(const std::string& path, const ShardPlan& plan) {
  if (!exists(path)) return false;
  K3_ASSIGN_OR_RETURN(SafetensorsHeader h, read_safetensors_header(path));
  bool same = h.tensors.size() == plan.entries.size();
  std::map<std::string, const TensorInfo*> by_name;
  for (const TensorInfo& t : h.tensors) by_name[t.name] = &t;
  for (size_t i = 0; same && i < plan.entries.size(); ++i) {
    auto it = by_name.find(plan.entries[i].name);
    same = it != by_name.end() && it->second->dtype == plan.entries[i].dtype &&
           it->second->shape == plan.entries[i].shape;
  }
  if (!same)
    return absl::FailedPreconditionError(
        cat(path,
            " exists but does not hold what this repack writes there; remove it or choose "
            "another --out"));
  return true;
}

class ShardWriter {
 public:
  ShardWriter(const Checkpoint& ck, const RepackOptions& opt, RepackProgress* prog,
              Clock::time_point t0)
      : ck_(ck), opt_(opt), prog_(prog), t0_(t0) {}

  Status write(const std::string& path, const ShardPlan& plan,
               const std::map<std::string, std::string>& metadata) {
    K3_ASSIGN_OR_RETURN(w_, SafetensorsWriter::create(path, plan.entries, metadata));
    std::vector<float> scales;  // of the matrix quantized last
    for (const Piece& p : plan.pieces) {
      switch (p.kind) {
        case Piece::Kind::kCopy:
          K3_RETURN_IF_ERROR(copy(*p.src));
          break;
        case Piece::Kind::kF32:
        case Piece::Kind::kQ8:
        case Piece::Kind::kQ4:
          K3_RETURN_IF_ERROR(convert(p, &scales));
          break;
        case Piece::Kind::kScales:
          K3_RETURN_IF_ERROR(put(scales.data(), scales.size() * sizeof(float)));
          break;
      }
    }
    Status s = w_->finish();
    w_.reset();
    return s;
  }

 private:
  Status put(const void* data, size_t n) {
    K3_RETURN_IF_ERROR(w_->write(data, n));
    prog_->bytes_done += n;
    prog_->seconds = std::chrono::duration<double>(Clock::now() - t0_).count();
    if (opt_.progress) opt_.progress(*prog_);
    return absl::OkStatus();
  }

  Status copy(const TensorInfo& t) {
    constexpr uint64_t kPiece = 8u << 20;
    buf_.resize(std::min<uint64_t>(kPiece, t.nbytes));
    for (uint64_t off = 0; off < t.nbytes; off += kPiece) {
      const uint64_t n = std::min(kPiece, t.nbytes - off);
      K3_RETURN_IF_ERROR(ck_.read_bytes(t, off, n, buf_.data()));
      K3_RETURN_IF_ERROR(put(buf_.data(), n));
    }
    return absl::OkStatus();
  }

  // Rows widened to f32 in blocks (as the engine's load does), then kept as
  // f32 or quantized by the row quantizers DenseMatrix::set_rows calls.
  Status convert(const Piece& p, std::vector<float>* scales) {
    const int64_t rows = p.rows, cols = p.cols, groups = (cols + 63) / 64;
    const int64_t block = std::max<int64_t>(1, (1 << 20) / std::max<int64_t>(cols, 1));
    std::vector<float> f(static_cast<size_t>(block * cols));
    std::vector<uint8_t> q;
    if (p.kind == Piece::Kind::kQ8) {
      scales->assign(static_cast<size_t>(rows), 0.0f);
      q.resize(static_cast<size_t>(block * cols));
    } else if (p.kind == Piece::Kind::kQ4) {
      scales->assign(static_cast<size_t>(rows * groups), 0.0f);
      q.resize(static_cast<size_t>(block * groups * 32));
    }
    for (int64_t r0 = 0; r0 < rows; r0 += block) {
      const int64_t n = std::min(block, rows - r0);
      K3_RETURN_IF_ERROR(ck_.read_rows_f32(*p.src, r0, n, f.data()));
      if (p.kind == Piece::Kind::kF32) {
        K3_RETURN_IF_ERROR(put(f.data(), static_cast<size_t>(n * cols) * sizeof(float)));
        continue;
      }
      for (int64_t i = 0; i < n; ++i) {
        const float* src = f.data() + i * cols;
        if (p.kind == Piece::Kind::kQ8)
          kernels::quantize_row_q8(src, cols, reinterpret_cast<int8_t*>(q.data()) + i * cols,
                                   scales->data() + r0 + i);
        else
          kernels::quantize_row_q4g64(src, cols, q.data() + i * groups * 32,
                                      scales->data() + (r0 + i) * groups);
      }
      const size_t row_bytes = p.kind == Piece::Kind::kQ8 ? cols : groups * 32;
      K3_RETURN_IF_ERROR(put(q.data(), static_cast<size_t>(n) * row_bytes));
    }
    return absl::OkStatus();
  }

  const Checkpoint& ck_;
  const RepackOptions& opt_;
  RepackProgress* prog_;
  Clock::time_point t0_;
  std::unique_ptr<SafetensorsWriter> w_;
  std::vector<uint8_t> buf_;
};

// Compares every expert byte of a written expert shard with the source.
StatusOr<int64_t> verify_experts(const Checkpoint& src, const ModelConfig& c,
                                 const std::string& path, int64_t layer) {
  K3_ASSIGN_OR_RETURN(SafetensorsHeader h, read_safetensors_header(path));
  K3_ASSIGN_OR_RETURN(base::File f, base::File::open_read(path));
  std::map<std::string, const TensorInfo*> out;
  for (const TensorInfo& t : h.tensors) out[t.name] = &t;
  std::vector<uint8_t> a, b;
  for (int64_t x = 0; x < c.num_experts; ++x) {
    for (const ExpectedTensor& e : expert_tensors(c, layer, x)) {
      K3_ASSIGN_OR_RETURN(const TensorInfo* s, src.get(e.name));
      auto it = out.find(s->name);
      if (it == out.end() || it->second->nbytes != s->nbytes)
        return absl::DataLossError(cat(path, ": tensor '", s->name, "' missing or resized"));
      a.resize(s->nbytes);
      b.resize(s->nbytes);
      K3_RETURN_IF_ERROR(src.read_bytes(*s, 0, s->nbytes, a.data()));
      K3_RETURN_IF_ERROR(f.pread_exact(b.data(), b.size(), it->second->offset));
      if (std::memcmp(a.data(), b.data(), a.size()) != 0)
        return absl::DataLossError(
            cat(path, ": tensor '", s->name, "' differs from the source (--verify)"));
    }
  }
  return c.num_experts;
}

// Rebuilds the index from every complete shard of this container.
StatusOr<int64_t> rebuild_index(const std::string& dir, int64_t shards, uint64_t* file_bytes) {
  nlohmann::ordered_json weight_map = nlohmann::ordered_json::object();
  std::map<std::string, std::string> owner;
  uint64_t total = 0;
  int64_t complete = 0;
  *file_bytes = 0;
  for (int64_t i = 1; i <= shards; ++i) {
    const std::string name = shard_name(i, shards), path = dir + "/" + name;
    if (!exists(path)) continue;
    K3_ASSIGN_OR_RETURN(SafetensorsHeader h, read_safetensors_header(path));
    for (const TensorInfo& t : h.tensors) {
      auto [it, inserted] = owner.emplace(t.name, name);
      if (!inserted)
        return absl::FailedPreconditionError(cat(dir, ": tensor '", t.name, "' is in both ",
                                                 it->second, " and ", name,
                                                 "; refusing to index duplicates"));
      weight_map[t.name] = name;
      total += t.nbytes;
    }
    *file_bytes += h.file_size;
    ++complete;
  }
  nlohmann::ordered_json idx = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  K3_RETURN_IF_ERROR(
      base::write_file_atomic(dir + "/model.safetensors.index.json", idx.dump(1) + "\n"));
  return complete;
}

// config.json (byte-identical: the model's identity) and the other small files
// beside the shards (tokenizer, templates).
Status copy_side_files(const std::string& src, const std::string& dst) {
  DIR* d = ::opendir(src.c_str());
  if (d == nullptr) return absl::NotFoundError(cat(src, ": ", std::strerror(errno)));
  std::vector<std::string> names;
  while (dirent* e = ::readdir(d)) names.push_back(e->d_name);
  ::closedir(d);
  for (const std::string& n : names) {
    struct stat st;
    const std::string p = src + "/" + n;
    if (::stat(p.c_str(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    if (n.size() > 12 && n.compare(n.size() - 12, 12, ".safetensors") == 0) continue;
    if (n == "model.safetensors.index.json" || n == kContainerFile || n[0] == '.') continue;
    K3_ASSIGN_OR_RETURN(std::string text, base::read_small_file(p, 256u << 20));
    auto have = base::read_small_file(dst + "/" + n, 256u << 20);
    if (have.ok() && *have == text) continue;
    K3_RETURN_IF_ERROR(base::write_file_atomic(dst + "/" + n, text));
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<std::pair<int64_t, int64_t>> parse_shard_range(const std::string& text) {
  auto num = [](const std::string& s, int64_t* v) {
    if (s.empty() || s.size() > 9 || s.find_first_not_of("0123456789") != std::string::npos)
      return false;
    *v = std::stoll(s);
    return *v >= 1;
  };
  const size_t dash = text.find('-');
  int64_t a = 0, b = 0;
  const bool ok = dash == std::string::npos
                      ? num(text, &a) && (b = a, true)
                      : num(text.substr(0, dash), &a) && num(text.substr(dash + 1), &b);
  if (!ok || a > b)
    return absl::InvalidArgumentError(
        cat("--shards '", text, "': expected A-B with 1 <= A <= B (output shard numbers)"));
  return std::pair{a, b};
}

StatusOr<RepackResult> repack(const RepackOptions& opt) {
  const auto t0 = Clock::now();
  if (opt.dense_bits != 4 && opt.dense_bits != 8)
    return absl::InvalidArgumentError("--bits must be 4 or 8");
  for (auto [flag, v] : {std::pair{"--mla-bits", opt.mla_bits}, {"--head-bits", opt.head_bits}})
    if (v != 4 && v != 8 && v != 32)
      return absl::InvalidArgumentError(cat(flag, " must be 4, 8 or 32"));
  K3_ASSIGN_OR_RETURN(std::optional<ContainerInfo> src_container,
                      read_container_info(opt.model_dir));
  if (src_container)
    return absl::InvalidArgumentError(
        cat(opt.model_dir, " is itself a container; repack from the source checkpoint"));
  K3_ASSIGN_OR_RETURN(std::string config_text,
                      base::read_small_file(opt.model_dir + "/config.json", 16u << 20));
  K3_ASSIGN_OR_RETURN(ModelConfig c, parse_model_config(config_text));
  K3_ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> ck, Checkpoint::open(opt.model_dir));
  if (opt.strict) K3_RETURN_IF_ERROR(ck->refuse_missing_shards());
  K3_RETURN_IF_ERROR(check_tensors(*ck, c, /*experts=*/true));

  if (::mkdir(opt.out_dir.c_str(), 0755) != 0 && errno != EEXIST)
    return absl::InternalError(cat(opt.out_dir, ": cannot create: ", std::strerror(errno)));
  {
    struct stat a, b;
    if (::stat(opt.model_dir.c_str(), &a) == 0 && ::stat(opt.out_dir.c_str(), &b) == 0 &&
        a.st_dev == b.st_dev && a.st_ino == b.st_ino)
      return absl::InvalidArgumentError("--out must not be the source directory");
  }

  ContainerInfo info;
  info.dense_bits = opt.dense_bits;
  info.mla_bits = opt.mla_bits;
  info.head_bits = opt.head_bits;
  info.dense_only = opt.dense_only;
  info.shards = opt.dense_only ? 1 : 1 + c.num_moe_layers();
  info.fingerprint = ck->fingerprint();

  RepackResult res;
  res.missing_shard_warnings = ck->missing_shard_warnings();
  res.shards = info.shards;
  res.source_bytes = ck->total_bytes();
  const int64_t first = opt.first_shard ? opt.first_shard : 1;
  const int64_t last = opt.last_shard ? opt.last_shard : info.shards;
  if (first < 1 || last > info.shards || first > last)
    return absl::InvalidArgumentError(
        cat("--shards ", first, "-", last, ": this container has output shards 1-", info.shards));

  // The destination's identity first: the same model at the same settings.
  {
    K3_ASSIGN_OR_RETURN(DirLock lock, DirLock::acquire(opt.out_dir));
    K3_ASSIGN_OR_RETURN(std::optional<ContainerInfo> have, read_container_info(opt.out_dir));
    if (have && !(*have == info))
      return absl::FailedPreconditionError(
          cat(opt.out_dir, " holds a repack with other settings or of another model (",
              kContainerFile, "); remove it or choose another --out"));
    K3_RETURN_IF_ERROR(copy_side_files(opt.model_dir, opt.out_dir));
    if (!have)
      K3_RETURN_IF_ERROR(
          base::write_file_atomic(opt.out_dir + "/" + kContainerFile, info.to_json()));
  }

  // Plans of every shard (the sizes), then the selected ones written.
  std::vector<ShardPlan> plans;
  {
    K3_ASSIGN_OR_RETURN(ShardPlan dense, plan_dense(*ck, c, info));
    plans.push_back(std::move(dense));
    if (!opt.dense_only)
      for (int64_t l = c.first_k_dense_replace; l < c.num_hidden_layers; ++l) {
        K3_ASSIGN_OR_RETURN(ShardPlan p, plan_experts(*ck, c, l));
        plans.push_back(std::move(p));
      }
  }
  std::set<std::string> in_plan;
  for (const ShardPlan& p : plans) {
    res.implied_bytes += p.bytes;
    for (const auto& e : p.entries) in_plan.insert(e.name);
  }
  for (const TensorInfo& t : ck->tensors()) {
    // Source tensors the container leaves out: the vision tower (and, for a
    // dense-only container, the experts; their quantized forms are new names).
    if (in_plan.count(t.name) || in_plan.count(quantized_name(t.name, 8)) ||
        in_plan.count(quantized_name(t.name, 4)))
      continue;
    if (opt.dense_only && is_routed_expert_tensor(t.name)) continue;
    ++res.dropped_tensors;
  }

  RepackProgress prog;
  prog.shards = info.shards;
  std::vector<bool> todo(plans.size(), false);
  for (int64_t i = first; i <= last; ++i) {
    const std::string path = opt.out_dir + "/" + shard_name(i, info.shards);
    K3_ASSIGN_OR_RETURN(bool done, shard_complete(path, plans[i - 1]));
    todo[i - 1] = !done;
    if (done)
      ++res.shards_kept;
    else
      prog.bytes_total += plans[i - 1].bytes;
  }
  ShardWriter writer(*ck, opt, &prog, t0);
  for (int64_t i = first; i <= last; ++i) {
    if (!todo[i - 1]) continue;
    prog.shard = i;
    const std::string path = opt.out_dir + "/" + shard_name(i, info.shards);
    K3_RETURN_IF_ERROR(
        writer.write(path, plans[i - 1],
                     {{"format", "pt"},
                      {"k3serve.container", "1"},
                      {"k3serve.shard", std::to_string(i)},
                      // The source's identity, for an expertd given the expert shards alone.
                      {kFingerprintMetadataKey, base::hex64(info.fingerprint)}}));
    ++res.shards_written;
  }
  res.bytes_written = prog.bytes_done;

  if (opt.verify) {
    for (int64_t i = first; i <= last; ++i) {
      if (plans[i - 1].moe_layer < 0) continue;
      K3_ASSIGN_OR_RETURN(int64_t n,
                          verify_experts(*ck, c, opt.out_dir + "/" + shard_name(i, info.shards),
                                         plans[i - 1].moe_layer));
      res.experts_verified += n;
    }
  }

  {
    K3_ASSIGN_OR_RETURN(DirLock lock, DirLock::acquire(opt.out_dir));
    K3_ASSIGN_OR_RETURN(res.shards_complete,
                        rebuild_index(opt.out_dir, info.shards, &res.container_bytes));
  }
  res.seconds = std::chrono::duration<double>(Clock::now() - t0).count();
  return res;
}

}  // namespace k3::checkpoint
