#include "engined/serving/checkpoint_store.h"

#include <sys/statvfs.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "shared/base/log.h"

namespace k3::engined {
namespace fs = std::filesystem;

struct CheckpointStore::Entry {
  std::vector<int32_t> tokens;
  float expert_top_p = 1.0f;  // the routing the state was computed under
  uint64_t bytes = 0;
  uint64_t last_used = 0;
  // In RAM, or the file holding them.
  std::unique_ptr<SequenceState> state;
  std::vector<float> logits;
  std::string path;
};

namespace {

constexpr char kMagic[8] = {'K', '3', 'S', 'T', 'A', 'T', 'E', '1'};

uint64_t state_bytes(const SequenceState& s, const std::vector<float>& logits) {
  return s.bytes() + logits.size() * sizeof(float);
}

void put_vec(std::ofstream& f, const std::vector<float>& v) {
  const uint64_t n = v.size();
  f.write(reinterpret_cast<const char*>(&n), sizeof n);
  f.write(reinterpret_cast<const char*>(v.data()), static_cast<std::streamsize>(n * 4));
}

// Reads a vector whose length must be `expect` (the model's geometry: a file
// is never trusted for sizes).
bool get_vec(std::ifstream& f, std::vector<float>& v, uint64_t expect) {
  uint64_t n = 0;
  if (!f.read(reinterpret_cast<char*>(&n), sizeof n) || n != expect) return false;
  v.resize(n);
  return static_cast<bool>(
      f.read(reinterpret_cast<char*>(v.data()), static_cast<std::streamsize>(n * 4)));
}

}  // namespace

CheckpointStore::CheckpointStore(const CheckpointOptions& opt,
                                 const checkpoint::ModelConfig& config, uint64_t fingerprint)
    : opt_(opt), config_(config), fingerprint_(fingerprint) {}

CheckpointStore::~CheckpointStore() {
  for (const auto& e : entries_) {
    std::error_code ec;
    if (!e->path.empty()) fs::remove(e->path, ec);
  }
}

StatusOr<std::unique_ptr<CheckpointStore>> CheckpointStore::open(
    const CheckpointOptions& opt, const checkpoint::ModelConfig& config, uint64_t fingerprint) {
  auto store = std::unique_ptr<CheckpointStore>(new CheckpointStore(opt, config, fingerprint));
  if (!opt.dir.empty() && opt.budget_bytes > 0) {
    std::error_code ec;
    fs::create_directories(opt.dir, ec);
    if (ec || !fs::is_directory(opt.dir))
      return absl::InvalidArgumentError(
          cat("checkpoint directory ", opt.dir, ": ", ec ? ec.message() : "not a directory"));
    for (const auto& d : fs::directory_iterator(opt.dir, ec)) {
      const std::string name = d.path().filename().string();
      const bool ours = name.rfind("ckpt-", 0) == 0 &&
                        (d.path().extension() == ".k3s" ||
                         name.size() > 8 && name.compare(name.size() - 8, 8, ".k3s.tmp") == 0);
      if (ours) fs::remove(d.path(), ec);
    }
  }
  return store;
}

bool CheckpointStore::has(const std::vector<int32_t>& tokens, int64_t n, float expert_top_p) const {
  for (const auto& e : entries_)
    if (static_cast<int64_t>(e->tokens.size()) == n && e->expert_top_p == expert_top_p &&
        std::equal(e->tokens.begin(), e->tokens.end(), tokens.begin()))
      return true;
  return false;
}

void CheckpointStore::evict_lru() {
  auto lru = std::min_element(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) {
    return a->last_used < b->last_used;
  });
  bytes_ -= (*lru)->bytes;
  ++evictions_;
  std::error_code ec;
  if (!(*lru)->path.empty()) fs::remove((*lru)->path, ec);
  entries_.erase(lru);
}

void CheckpointStore::evict_until(uint64_t need) {
  while (!entries_.empty() && bytes_ + need > opt_.budget_bytes) evict_lru();
}

uint64_t CheckpointStore::free_space() const {
  struct statvfs st;
  if (::statvfs(opt_.dir.c_str(), &st) != 0) return ~0ull;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

// Room on the disk first (file sizes are the state's bytes plus a few headers),
// then the write; a write that still runs out of space evicts and tries again.
Status CheckpointStore::save_file(Entry& e, const SequenceState& state,
                                  const std::vector<float>& logits) {
  constexpr uint64_t kSlack = 1 << 20;  // headers, filesystem metadata
  while (!entries_.empty() && free_space() < e.bytes + kSlack) {
    evict_lru();
    ++evicted_for_space_;
  }
  for (;;) {
    Status st = write_file(e, state, logits);
    // Only a shortage of space is cured by evicting (not, say, permissions).
    if (st.ok() || entries_.empty() || free_space() >= e.bytes + kSlack) return st;
    evict_lru();
    ++evicted_for_space_;
  }
}

void CheckpointStore::warn_failed(const Status& s) {
  ++failed_saves_;
  ++failures_since_warning_;
  const auto now = std::chrono::steady_clock::now();
  if (last_warning_ != std::chrono::steady_clock::time_point{} &&
      now - last_warning_ < std::chrono::minutes(1))
    return;
  base::logger("engined")->warn(
      "turn checkpoint not saved ({} failure(s) since the last warning): {}",
      failures_since_warning_, msg(s));
  failures_since_warning_ = 0;
  last_warning_ = now;
}

Status CheckpointStore::save(const std::vector<int32_t>& tokens, int64_t n,
                             const SequenceState& state, const std::vector<float>& logits,
                             float expert_top_p) {
  if (!enabled() || n <= 0 || has(tokens, n, expert_top_p)) return absl::OkStatus();
  const uint64_t need = state_bytes(state, logits);
  if (need > opt_.budget_bytes) return absl::OkStatus();
  evict_until(need);
  auto e = std::make_unique<Entry>();
  e->tokens.assign(tokens.begin(), tokens.begin() + n);
  e->expert_top_p = expert_top_p;
  e->bytes = need;
  e->last_used = ++clock_;
  if (opt_.dir.empty()) {
    e->state = std::make_unique<SequenceState>(state);
    e->logits = logits;
  } else {
    e->path = (fs::path(opt_.dir) / cat("ckpt-", next_file_++, ".k3s")).string();
    if (Status st = save_file(*e, state, logits); !st.ok()) {
      warn_failed(st);
      return st;
    }
  }
  bytes_ += need;
  entries_.push_back(std::move(e));
  return absl::OkStatus();
}

RestoredState CheckpointStore::restore_deepest(const std::vector<int32_t>& prompt,
                                               int64_t min_tokens, float expert_top_p) {
  Entry* best = nullptr;
  for (const auto& e : entries_) {
    const int64_t n = static_cast<int64_t>(e->tokens.size());
    if (n <= min_tokens || n > static_cast<int64_t>(prompt.size())) continue;
    if (e->expert_top_p != expert_top_p) continue;
    if (best != nullptr && n <= static_cast<int64_t>(best->tokens.size())) continue;
    if (std::equal(e->tokens.begin(), e->tokens.end(), prompt.begin())) best = e.get();
  }
  RestoredState r;
  if (best == nullptr) return r;
  best->last_used = ++clock_;
  if (best->path.empty()) {
    r.state = std::make_unique<SequenceState>(*best->state);
    r.logits = best->logits;
    r.tokens = static_cast<int64_t>(best->tokens.size());
    return r;
  }
  auto read = read_file(*best);
  if (!read.ok()) {
    base::logger("engined")->warn("dropping checkpoint {}: {}", best->path, msg(read.status()));
    auto it = std::find_if(entries_.begin(), entries_.end(),
                           [&](const auto& e) { return e.get() == best; });
    bytes_ -= best->bytes;
    std::error_code ec;
    fs::remove(best->path, ec);
    entries_.erase(it);
    return r;
  }
  return std::move(*read);
}

Status CheckpointStore::write_file(const Entry& e, const SequenceState& state,
                                   const std::vector<float>& logits) {
  const std::string tmp = e.path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    if (!f) return absl::UnavailableError(cat("cannot write checkpoint ", tmp));
    f.write(kMagic, sizeof kMagic);
    const int64_t pos = state.position;
    f.write(reinterpret_cast<const char*>(&fingerprint_), sizeof fingerprint_);
    f.write(reinterpret_cast<const char*>(&pos), sizeof pos);
    for (size_t l = 0; l < state.kda.size(); ++l) {
      put_vec(f, state.kda[l].s);
      put_vec(f, state.kda[l].conv_q);
      put_vec(f, state.kda[l].conv_k);
      put_vec(f, state.kda[l].conv_v);
      put_vec(f, state.mla[l].ckv);
      put_vec(f, state.mla[l].k_r);
    }
    put_vec(f, logits);
    f.flush();
    if (!f) {
      std::error_code ec;
      fs::remove(tmp, ec);
      return absl::UnavailableError(cat("writing checkpoint ", tmp, " failed (disk full?)"));
    }
  }
  std::error_code ec;
  fs::rename(tmp, e.path, ec);
  if (ec) {
    std::error_code ignored;
    fs::remove(tmp, ignored);
    return absl::UnavailableError(cat("renaming checkpoint ", tmp, ": ", ec.message()));
  }
  return absl::OkStatus();
}

StatusOr<RestoredState> CheckpointStore::read_file(const Entry& e) const {
  std::ifstream f(e.path, std::ios::binary);
  if (!f) return absl::NotFoundError(cat("cannot open ", e.path));
  char magic[8];
  uint64_t fp = 0;
  int64_t pos = 0;
  if (!f.read(magic, 8) || std::memcmp(magic, kMagic, 8) != 0)
    return absl::DataLossError("bad magic");
  if (!f.read(reinterpret_cast<char*>(&fp), sizeof fp) || fp != fingerprint_)
    return absl::DataLossError("written for another model");
  const int64_t n = static_cast<int64_t>(e.tokens.size());
  if (!f.read(reinterpret_cast<char*>(&pos), sizeof pos) || pos != n)
    return absl::DataLossError("position does not match its tokens");
  RestoredState r;
  r.state = std::make_unique<SequenceState>(config_);  // the expected geometry
  r.state->position = pos;
  const uint64_t ckv = static_cast<uint64_t>(pos * config_.kv_lora_rank);
  const uint64_t kr = static_cast<uint64_t>(pos * config_.qk_rope_head_dim);
  for (size_t l = 0; l < r.state->kda.size(); ++l) {
    KdaState& k = r.state->kda[l];
    const bool mla = !config_.is_kda(static_cast<int64_t>(l));
    if (!get_vec(f, k.s, k.s.size()) || !get_vec(f, k.conv_q, k.conv_q.size()) ||
        !get_vec(f, k.conv_k, k.conv_k.size()) || !get_vec(f, k.conv_v, k.conv_v.size()) ||
        !get_vec(f, r.state->mla[l].ckv, mla ? ckv : 0) ||
        !get_vec(f, r.state->mla[l].k_r, mla ? kr : 0))
      return absl::DataLossError(cat("layer ", l, " is truncated or has the wrong size"));
  }
  if (!get_vec(f, r.logits, static_cast<uint64_t>(config_.vocab_size)))
    return absl::DataLossError("logits are truncated or have the wrong size");
  r.tokens = n;
  return r;
}

}  // namespace k3::engined
