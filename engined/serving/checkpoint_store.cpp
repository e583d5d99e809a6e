#include "engined/serving/checkpoint_store.h"

#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <cstring>

#include <algorithm>
#include <filesystem>

#include "shared/base/file.h"
#include "shared/base/log.h"

namespace k3::engined {
namespace fs = std::filesystem;

// A saved state and its logits; immutable once shared between the RAM tier
// and a queued write.
struct CheckpointStore::Stored {
  SequenceState state;
  std::vector<float> logits;
};

struct CheckpointStore::Entry {
  std::vector<int32_t> tokens;
  float expert_top_p = 1.0f;  // the routing the state was computed under
  uint64_t bytes = 0;         // in RAM
  uint64_t file_bytes = 0;    // on disk (reserved while writing)
  uint64_t last_used = 0;
  std::shared_ptr<const Stored> ram;      // the RAM tier's copy
  std::shared_ptr<const Stored> writing;  // the copy a queued write holds
  uint64_t tag = 0;                       // of the queued write
  bool on_disk = false;                   // the file is written
  std::string path;                       // with a disk tier
};

namespace {

uint64_t state_bytes(const SequenceState& s, const std::vector<float>& logits) {
  return s.bytes() + logits.size() * sizeof(float);
}

std::shared_ptr<spdlog::logger> log() {
  return base::logger("engined");
}

constexpr uint64_t kDiskSlack = 1 << 20;  // filesystem metadata

}  // namespace

CheckpointStore::CheckpointStore(const CheckpointOptions& opt,
                                 const checkpoint::ModelConfig& config, uint64_t fingerprint,
                                 int dense_bits)
    : opt_(opt), config_(config), fingerprint_(fingerprint), dense_bits_(dense_bits) {}

CheckpointStore::~CheckpointStore() {
  writer_.reset();
}

namespace {

// Conversation states are read back as computed: the directory must be
// the service's (its euid's, or root's, e.g. a StateDirectory), and no other
// user may write to it (plant a file, or a symlink where a temporary goes).
Status check_dir_owner(const std::string& dir) {
  struct stat st {};
  if (::lstat(dir.c_str(), &st) != 0)
    return absl::InvalidArgumentError(
        cat("checkpoint directory ", dir, ": ", std::strerror(errno)));
  const unsigned mode = st.st_mode & 07777;
  const std::string m = base::octal_mode(mode);
  if (!S_ISDIR(st.st_mode))
    return absl::InvalidArgumentError(
        cat("checkpoint directory ", dir, " is not a directory (a symlink is refused)"));
  if (st.st_uid != ::geteuid() && st.st_uid != 0)
    return absl::PermissionDeniedError(cat("checkpoint directory ", dir, " belongs to uid ",
                                           st.st_uid, " (mode ", m, "), not to this service (uid ",
                                           ::geteuid(), ") or root: refusing to use it"));
  if (mode & S_IWOTH)
    return absl::PermissionDeniedError(
        cat("checkpoint directory ", dir, " is writable by every user (mode ", m,
            "): another user could plant files in it; chmod o-w it (0700 or 0750)"));
  return absl::OkStatus();
}

}  // namespace

StatusOr<std::unique_ptr<CheckpointStore>> CheckpointStore::open(
    const CheckpointOptions& opt, const checkpoint::ModelConfig& config, uint64_t fingerprint,
    int dense_bits) {
  auto store =
      std::unique_ptr<CheckpointStore>(new CheckpointStore(opt, config, fingerprint, dense_bits));
  if (store->disk_enabled()) {
    K3_RETURN_IF_ERROR(store->index_dir());
    store->writer_ = std::make_unique<DiskWriteQueue>(opt.write_queue);
  }
  return store;
}

Status CheckpointStore::index_dir() {
  std::error_code ec;
  // A directory made here is the service's alone (0700, whatever the umask).
  if (fs::create_directories(opt_.dir, ec) && !ec)
    fs::permissions(opt_.dir, fs::perms::owner_all, fs::perm_options::replace, ec);
  if (ec || !fs::is_directory(opt_.dir))
    return absl::InvalidArgumentError(
        cat("checkpoint directory ", opt_.dir, ": ", ec ? ec.message() : "not a directory"));
  K3_RETURN_IF_ERROR(check_dir_owner(opt_.dir));
  struct Found {
    std::unique_ptr<Entry> e;
    fs::file_time_type mtime;
  };
  std::vector<Found> found;
  size_t refused = 0, others = 0;
  const auto now = fs::file_time_type::clock::now();
  for (const auto& d : fs::directory_iterator(opt_.dir, ec)) {
    const std::string name = d.path().filename().string();
    std::error_code ig;
    // The former format's files (wiped at every start then) are never read.
    const bool old_format =
        name.rfind("ckpt-", 0) == 0 &&
        (d.path().extension() == ".k3s" ||
         (name.size() > 8 && name.compare(name.size() - 8, 8, ".k3s.tmp") == 0));
    if (old_format) {
      fs::remove(d.path(), ig);
      continue;
    }
    if (is_snapshot_temp_name(name)) {
      const auto mtime = fs::last_write_time(d.path(), ig);
      if (!ig && now - mtime > std::chrono::hours(1)) fs::remove(d.path(), ig);
      continue;
    }
    if (!is_snapshot_file_name(name)) continue;
    auto h = read_snapshot_header(d.path().string(), config_);
    if (!h.ok()) {
      if (h.status().code() == absl::StatusCode::kNotFound) continue;  // gone meanwhile
      if (h.status().code() == absl::StatusCode::kFailedPrecondition) {
        ++others;  // another engined's format: not ours to remove
        continue;
      }
      log()->warn("refusing checkpoint file {}: {}", d.path().string(), msg(h.status()));
      ++refused;
      ++files_refused_;
      fs::remove(d.path(), ig);
      continue;
    }
    if (h->identity.fingerprint != fingerprint_ || h->identity.dense_bits != dense_bits_ ||
        snapshot_file_name(h->identity, h->tokens) != name) {
      ++others;
      continue;
    }
    Found f;
    f.e = std::make_unique<Entry>();
    f.e->tokens = std::move(h->tokens);
    f.e->expert_top_p = h->identity.expert_top_p;
    f.e->file_bytes = h->file_bytes;
    f.e->on_disk = true;
    f.e->path = d.path().string();
    f.mtime = fs::last_write_time(d.path(), ig);
    found.push_back(std::move(f));
  }
  // Least recently written first: the oldest are used least recently.
  std::sort(found.begin(), found.end(),
            [](const Found& a, const Found& b) { return a.mtime < b.mtime; });
  for (auto& f : found) {
    f.e->last_used = ++clock_;
    disk_bytes_ += f.e->file_bytes;
    entries_.push_back(std::move(f.e));
  }
  evict_disk_until(0);
  log()->info(
      "checkpoint directory {}: {} saved state(s) of this model ({} bytes), {} refused, {} "
      "of other models or formats left alone",
      opt_.dir, entries_.size(), disk_bytes_, refused, others);
  return absl::OkStatus();
}

CheckpointStore::Entry* CheckpointStore::find(const std::vector<int32_t>& tokens, int64_t n,
                                              float expert_top_p) {
  for (const auto& e : entries_)
    if (static_cast<int64_t>(e->tokens.size()) == n && e->expert_top_p == expert_top_p &&
        std::equal(e->tokens.begin(), e->tokens.end(), tokens.begin()))
      return e.get();
  return nullptr;
}

bool CheckpointStore::has(const std::vector<int32_t>& tokens, int64_t n, float expert_top_p) {
  drain_writes();
  return find(tokens, n, expert_top_p) != nullptr;
}

void CheckpointStore::drain_writes() {
  if (!writer_) return;
  for (DiskWriteQueue::Done& d : writer_->take_done()) {
    auto it = std::find_if(entries_.begin(), entries_.end(),
                           [&](const auto& e) { return e->writing && e->tag == d.tag; });
    if (it == entries_.end()) continue;  // cannot happen: a writing entry is never erased
    Entry& e = **it;
    e.writing.reset();
    if (d.status.ok()) {
      e.on_disk = true;
    } else {
      disk_bytes_ -= e.file_bytes;
      warn_failed(d.status);
      erase_if_empty(&e);
    }
  }
}

void CheckpointStore::erase_if_empty(Entry* e) {
  if (e->ram || e->writing || e->on_disk) return;
  entries_.erase(
      std::find_if(entries_.begin(), entries_.end(), [&](const auto& x) { return x.get() == e; }));
}

void CheckpointStore::drop_file(Entry& e) {
  std::error_code ec;
  fs::remove(e.path, ec);
  e.on_disk = false;
  disk_bytes_ -= e.file_bytes;
}

uint64_t CheckpointStore::free_space() const {
  struct statvfs st;
  if (::statvfs(opt_.dir.c_str(), &st) != 0) return ~0ull;
  return static_cast<uint64_t>(st.f_bavail) * st.f_frsize;
}

void CheckpointStore::evict_ram_until(uint64_t need) {
  while (ram_bytes_ + need > opt_.budget_bytes) {
    Entry* lru = nullptr;
    for (const auto& e : entries_)
      if (e->ram && (lru == nullptr || e->last_used < lru->last_used)) lru = e.get();
    if (lru == nullptr) return;
    ram_bytes_ -= lru->bytes;
    ++evictions_;
    std::shared_ptr<const Stored> data = std::move(lru->ram);
    // Evicted from RAM to the disk when it has no file yet (its first write
    // was dropped).
    if (disk_enabled() && !lru->on_disk && !lru->writing) queue_write(*lru, std::move(data));
    erase_if_empty(lru);
  }
}

void CheckpointStore::evict_disk_until(uint64_t need) {
  for (;;) {
    const bool over_budget = disk_bytes_ + need > opt_.disk_budget_bytes;
    const bool over_disk = need > 0 && free_space() < need + kDiskSlack;
    if (!over_budget && !over_disk) return;
    Entry* lru = nullptr;
    for (const auto& e : entries_)
      if (e->on_disk && (lru == nullptr || e->last_used < lru->last_used)) lru = e.get();
    if (lru == nullptr) return;
    drop_file(*lru);
    ++evictions_;
    if (!over_budget) ++evicted_for_space_;
    erase_if_empty(lru);
  }
}

bool CheckpointStore::queue_write(Entry& e, std::shared_ptr<const Stored> data) {
  const uint64_t need = snapshot_file_bytes(config_, static_cast<int64_t>(e.tokens.size()));
  if (need > opt_.disk_budget_bytes) return false;
  evict_disk_until(need);
  if (disk_bytes_ + need > opt_.disk_budget_bytes) return false;  // the rest is being written
  if (const uint64_t room = free_space(); room < need + kDiskSlack) {
    warn_failed(absl::UnavailableError(
        cat("a checkpoint file of ", need, " bytes does not fit on the disk (", room, " free)")));
    return false;
  }
  const uint64_t tag = ++next_tag_;
  e.path = (fs::path(opt_.dir) / snapshot_file_name(identity(e.expert_top_p), e.tokens)).string();
  auto write = [path = e.path, id = identity(e.expert_top_p), tokens = e.tokens, data] {
    return write_snapshot_file(path, id, tokens, data->state, data->logits);
  };
  if (!writer_->try_post(tag, std::move(write))) {
    // Counted by the queue (k3_snapshot_writes_dropped_total); the state
    // stays in RAM when it has a copy there.
    log()->debug("checkpoint file {} not written: the disk write queue is full", e.path);
    return false;
  }
  e.tag = tag;
  e.file_bytes = need;
  e.writing = std::move(data);
  disk_bytes_ += need;
  return true;
}

void CheckpointStore::warn_failed(const Status& s) {
  ++failed_saves_;
  ++failures_since_warning_;
  const auto now = std::chrono::steady_clock::now();
  if (last_warning_ != std::chrono::steady_clock::time_point{} &&
      now - last_warning_ < std::chrono::minutes(1))
    return;
  log()->warn("checkpoint not saved ({} failure(s) since the last warning): {}",
              failures_since_warning_, msg(s));
  failures_since_warning_ = 0;
  last_warning_ = now;
}

Status CheckpointStore::save(const std::vector<int32_t>& tokens, int64_t n,
                             const SequenceState& state, const std::vector<float>& logits,
                             float expert_top_p) {
  if (!enabled() || n <= 0 || has(tokens, n, expert_top_p)) return absl::OkStatus();
  const uint64_t need = state_bytes(state, logits);
  const bool to_ram = need <= opt_.budget_bytes;
  const bool to_disk = disk_enabled() && snapshot_file_bytes(config_, n) <= opt_.disk_budget_bytes;
  if (!to_ram && !to_disk) return absl::OkStatus();
  if (to_ram) evict_ram_until(need);
  auto data = std::make_shared<const Stored>(Stored{state, logits});
  auto e = std::make_unique<Entry>();
  e->tokens.assign(tokens.begin(), tokens.begin() + n);
  e->expert_top_p = expert_top_p;
  e->bytes = need;
  e->last_used = ++clock_;
  Entry& ref = *e;
  entries_.push_back(std::move(e));
  if (to_ram) {
    ref.ram = data;
    ram_bytes_ += need;
  }
  const uint64_t failed_before = failed_saves_;
  if (to_disk) queue_write(ref, std::move(data));
  if (ref.ram || ref.writing) return absl::OkStatus();
  erase_if_empty(&ref);
  // Not kept anywhere: a failure (counted once).
  Status st = absl::UnavailableError(
      "checkpoint not saved: no room on the disk, its budget is taken by writes in progress, or "
      "its write queue is full");
  if (failed_saves_ == failed_before) warn_failed(st);
  return st;
}

RestoredState CheckpointStore::restore_deepest(const std::vector<int32_t>& prompt,
                                               int64_t min_tokens, float expert_top_p) {
  drain_writes();
  for (;;) {
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
    if (const Stored* in_memory = best->ram ? best->ram.get() : best->writing.get()) {
      r.state = std::make_unique<SequenceState>(in_memory->state);
      r.logits = in_memory->logits;
      r.tokens = static_cast<int64_t>(best->tokens.size());
      return r;
    }
    auto read = read_snapshot_file(best->path, config_, identity(expert_top_p), best->tokens);
    if (read.ok()) {
      // Back into RAM: it is the most recently used now.
      const uint64_t need = state_bytes(*read->state, read->logits);
      if (need <= opt_.budget_bytes) {
        evict_ram_until(need);
        best->ram = std::make_shared<const Stored>(Stored{*read->state, read->logits});
        best->bytes = need;
        ram_bytes_ += need;
      }
      return std::move(*read);
    }
    if (read.status().code() == absl::StatusCode::kNotFound) {
      // Another engined sharing the directory evicted it: a miss.
      log()->debug("checkpoint {} is gone", best->path);
      best->on_disk = false;
      disk_bytes_ -= best->file_bytes;
    } else {
      log()->warn("refusing checkpoint {}: {}", best->path, msg(read.status()));
      ++files_refused_;
      drop_file(*best);
    }
    erase_if_empty(best);
  }
}

}  // namespace k3::engined
