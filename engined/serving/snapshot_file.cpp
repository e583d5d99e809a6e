#include "engined/serving/snapshot_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "shared/base/file.h"
#include "shared/base/hash.h"

namespace k3::engined {
namespace fs = std::filesystem;

namespace {

constexpr char kMagic[8] = {'K', '3', 'S', 'N', 'A', 'P', 'S', 'H'};
constexpr uint64_t kFieldBytes = 48;   // the header's fields
constexpr uint64_t kHeaderBytes = 64;  // fields + their XXH3-128
constexpr uint64_t kTrailerBytes = 16;
constexpr char kSuffix[] = ".k3snap";

struct Fields {
  char magic[8];
  uint32_t version;
  uint32_t dense_bits;
  uint64_t fingerprint;
  float expert_top_p;
  uint32_t zero;
  uint64_t n_tokens;
  uint64_t payload_bytes;
};
static_assert(sizeof(Fields) == kFieldBytes);

// Floats of each part of the payload, in file order, for a state after `n`
// tokens (the geometry decides; a file never does).
std::vector<uint64_t> payload_parts(const checkpoint::ModelConfig& c, int64_t n) {
  std::vector<uint64_t> parts;
  const uint64_t hdd = static_cast<uint64_t>(c.kda_num_heads * c.kda_head_dim * c.kda_head_dim);
  const uint64_t win = static_cast<uint64_t>((c.short_conv_kernel_size - 1) * c.kda_proj());
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const bool kda = c.is_kda(l);
    parts.push_back(kda ? hdd : 0);
    for (int k = 0; k < 3; ++k) parts.push_back(kda ? win : 0);
    parts.push_back(kda ? 0 : static_cast<uint64_t>(n * c.kv_lora_rank));
    parts.push_back(kda ? 0 : static_cast<uint64_t>(n * c.qk_rope_head_dim));
  }
  parts.push_back(static_cast<uint64_t>(c.vocab_size));
  return parts;
}

uint64_t payload_bytes(const checkpoint::ModelConfig& c, int64_t n) {
  uint64_t b = 0;
  for (uint64_t p : payload_parts(c, n)) b += p * 4;
  return b;
}

// The state's vectors in file order (the same order as payload_parts).
template <typename State, typename Vec>
std::vector<Vec*> state_parts(State& s, Vec& logits) {
  std::vector<Vec*> out;
  for (size_t l = 0; l < s.kda.size(); ++l) {
    out.push_back(&s.kda[l].s);
    out.push_back(&s.kda[l].conv_q);
    out.push_back(&s.kda[l].conv_k);
    out.push_back(&s.kda[l].conv_v);
    out.push_back(&s.mla[l].ckv);
    out.push_back(&s.mla[l].k_r);
  }
  out.push_back(&logits);
  return out;
}

Fields make_fields(const SnapshotIdentity& id, uint64_t n, uint64_t payload) {
  Fields f{};
  std::memcpy(f.magic, kMagic, sizeof kMagic);
  f.version = kSnapshotVersion;
  f.dense_bits = static_cast<uint32_t>(id.dense_bits);
  f.fingerprint = id.fingerprint;
  f.expert_top_p = id.expert_top_p;
  f.n_tokens = n;
  f.payload_bytes = payload;
  return f;
}

base::Hash128 header_hash(const Fields& f, const std::vector<int32_t>& tokens) {
  base::Xxh3Stream h;
  h.update(&f, sizeof f);
  h.update(tokens.data(), tokens.size() * sizeof(int32_t));
  return h.digest();
}

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

bool is_hex(const std::string& s, size_t from, size_t n) {
  if (s.size() < from + n) return false;
  for (size_t i = from; i < from + n; ++i)
    if (!std::isxdigit(static_cast<unsigned char>(s[i]))) return false;
  return true;
}

// The header's checks, common to indexing and restoring.
StatusOr<SnapshotHeader> check_header(const base::File& f, const checkpoint::ModelConfig& config) {
  const uint64_t size = f.size();
  if (size < kHeaderBytes + kTrailerBytes)
    return absl::DataLossError(cat("truncated: ", size, " bytes"));
  Fields h{};
  base::Hash128 stored;
  K3_RETURN_IF_ERROR(f.pread_exact(&h, sizeof h, 0));
  K3_RETURN_IF_ERROR(f.pread_exact(&stored, sizeof stored, kFieldBytes));
  if (std::memcmp(h.magic, kMagic, sizeof kMagic) != 0)
    return absl::DataLossError("not a snapshot (bad magic)");
  if (h.version != kSnapshotVersion)
    return absl::FailedPreconditionError(
        cat("format version ", h.version, " (this engined reads ", kSnapshotVersion, ")"));
  // Sizes from the geometry: n_tokens is bounded by the file's size before
  // anything is allocated for it.
  if (h.n_tokens == 0 || h.n_tokens > (size - kHeaderBytes) / 4)
    return absl::DataLossError(cat("token count ", h.n_tokens, " does not fit the file"));
  const int64_t n = static_cast<int64_t>(h.n_tokens);
  const uint64_t want = snapshot_file_bytes(config, n);
  if (h.payload_bytes != want - kHeaderBytes - kTrailerBytes - h.n_tokens * 4 || size != want)
    return absl::DataLossError(
        cat("size ", size, " bytes is not the ", want, " of a state after ", n, " tokens"));
  SnapshotHeader out;
  out.tokens.resize(h.n_tokens);
  K3_RETURN_IF_ERROR(f.pread_exact(out.tokens.data(), h.n_tokens * 4, kHeaderBytes));
  if (!(header_hash(h, out.tokens) == stored))
    return absl::DataLossError("header checksum differs");
  out.identity.fingerprint = h.fingerprint;
  out.identity.dense_bits = static_cast<int>(h.dense_bits);
  out.identity.expert_top_p = h.expert_top_p;
  out.file_bytes = size;
  return out;
}

}  // namespace

uint64_t snapshot_file_bytes(const checkpoint::ModelConfig& config, int64_t n_tokens) {
  return kHeaderBytes + static_cast<uint64_t>(n_tokens) * 4 + payload_bytes(config, n_tokens) +
         kTrailerBytes;
}

std::string snapshot_file_name(const SnapshotIdentity& id, const std::vector<int32_t>& tokens) {
  const Fields f = make_fields(id, tokens.size(), 0);
  return cat("snap-", header_hash(f, tokens).hex(), kSuffix);
}

bool is_snapshot_file_name(const std::string& name) {
  return name.size() == 5 + 32 + 7 && name.rfind("snap-", 0) == 0 && is_hex(name, 5, 32) &&
         ends_with(name, kSuffix);
}

bool is_snapshot_temp_name(const std::string& name) {
  const size_t tmp = name.find(".k3snap.tmp.");
  return name.rfind(".snap-", 0) == 0 && tmp == 6 + 32 && is_hex(name, 6, 32);
}

Status write_snapshot_file(const std::string& path, const SnapshotIdentity& id,
                           const std::vector<int32_t>& tokens, const SequenceState& state,
                           const std::vector<float>& logits) {
  static std::atomic<uint64_t> serial{0};
  const fs::path final_path(path);
  const std::string tmp =
      (final_path.parent_path() /
       cat(".", final_path.filename().string(), ".tmp.", ::getpid(), ".", serial.fetch_add(1)))
          .string();
  const int64_t n = static_cast<int64_t>(tokens.size());
  if (state.position != n)
    return absl::InternalError(cat("state at ", state.position, " saved for ", n, " tokens"));
  // 0600: a conversation's state is the service's alone.
  auto file = base::File::create(tmp, 0600);
  if (!file.ok()) return absl::UnavailableError(msg(file.status()));
  auto fail = [&](const Status& s) {
    std::error_code ec;
    fs::remove(tmp, ec);
    return absl::UnavailableError(cat("writing snapshot ", tmp, ": ", msg(s)));
  };
  uint64_t payload = 0;
  for (const std::vector<float>* v : state_parts(state, logits)) payload += v->size() * 4;
  const Fields h = make_fields(id, tokens.size(), payload);
  const base::Hash128 hh = header_hash(h, tokens);
  base::Xxh3Stream whole;
  uint64_t off = 0;
  auto put = [&](const void* p, size_t bytes) -> Status {
    whole.update(p, bytes);
    K3_RETURN_IF_ERROR(file->pwrite_all(p, bytes, off));
    off += bytes;
    return absl::OkStatus();
  };
  Status st = put(&h, sizeof h);
  if (st.ok()) st = put(&hh, sizeof hh);
  if (st.ok()) st = put(tokens.data(), tokens.size() * 4);
  for (const std::vector<float>* v : state_parts(state, logits))
    if (st.ok()) st = put(v->data(), v->size() * 4);
  if (st.ok()) {
    const base::Hash128 sum = whole.digest();
    st = file->pwrite_all(&sum, sizeof sum, off);
  }
  if (st.ok()) st = file->close();
  if (!st.ok()) return fail(st);
  std::error_code ec;
  fs::rename(tmp, path, ec);
  if (ec) return fail(absl::UnavailableError(cat("rename to ", path, ": ", ec.message())));
  return absl::OkStatus();
}

StatusOr<SnapshotHeader> read_snapshot_header(const std::string& path,
                                              const checkpoint::ModelConfig& config) {
  auto f = base::File::open_read(path, O_NOFOLLOW);
  if (!f.ok()) {
    if (!fs::exists(path)) return absl::NotFoundError(cat(path, " is gone"));
    return f.status();
  }
  return check_header(*f, config);
}

StatusOr<RestoredState> read_snapshot_file(const std::string& path,
                                           const checkpoint::ModelConfig& config,
                                           const SnapshotIdentity& id,
                                           const std::vector<int32_t>& tokens) {
  auto f = base::File::open_read(path, O_NOFOLLOW);
  if (!f.ok()) {
    if (!fs::exists(path)) return absl::NotFoundError(cat(path, " is gone"));
    return f.status();
  }
  K3_ASSIGN_OR_RETURN(SnapshotHeader h, check_header(*f, config));
  if (!(h.identity == id))
    return absl::FailedPreconditionError(
        cat("of another model, dense bits or expert top-p (fingerprint ",
            base::hex64(h.identity.fingerprint), ", ", h.identity.dense_bits, " bits, top-p ",
            h.identity.expert_top_p, ")"));
  if (h.tokens != tokens) return absl::DataLossError("its tokens are not the ones indexed");
  const int64_t n = static_cast<int64_t>(tokens.size());
  RestoredState r;
  r.state = std::make_unique<SequenceState>(config);  // the expected geometry
  r.state->position = n;
  const std::vector<uint64_t> parts = payload_parts(config, n);
  std::vector<std::vector<float>*> dst = state_parts(*r.state, r.logits);
  base::Xxh3Stream whole;
  // The header and tokens again, as bytes (hashed as written).
  std::vector<char> head(kHeaderBytes + tokens.size() * 4);
  K3_RETURN_IF_ERROR(f->pread_exact(head.data(), head.size(), 0));
  whole.update(head.data(), head.size());
  uint64_t off = head.size();
  for (size_t i = 0; i < dst.size(); ++i) {
    dst[i]->resize(parts[i]);
    K3_RETURN_IF_ERROR(f->pread_exact(dst[i]->data(), parts[i] * 4, off));
    whole.update(dst[i]->data(), parts[i] * 4);
    off += parts[i] * 4;
  }
  base::Hash128 stored;
  K3_RETURN_IF_ERROR(f->pread_exact(&stored, sizeof stored, off));
  if (!(whole.digest() == stored))
    return absl::DataLossError("checksum differs (a corrupt or torn file)");
  r.tokens = n;
  return r;
}

}  // namespace k3::engined
