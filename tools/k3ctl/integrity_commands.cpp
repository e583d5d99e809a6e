// `k3ctl manifest` writes a checkpoint's integrity manifest
// (shared/checkpoint/manifest.h); `k3ctl verify` checks every byte against it
// and/or whole files against a sha256sum-format list.
//
//   k3ctl manifest --model DIR [--shard-dir D ...] --out FILE [--threads N] [--force]
//                  [--strict]
//   k3ctl verify --model DIR [--shard-dir D ...] (--manifest FILE | --sha256 FILE)
//                [--threads N] [--no-direct] [--strict]
//
// Both accept a snapshot without its vision shards (the index names shards of
// tensors the model does not use that are not on disk): a warning on stderr,
// and verify counts what those shards held as absent, not bad; --strict
// refuses such a snapshot.
// manifest: written to FILE.partial line by line and renamed when complete; a
// killed run resumes from the complete lines of FILE.partial. FILE must lie
// outside the model's directories (nothing is ever written to a model).
// verify: one stdout JSON line per problem, then a summary line; exit 1 when
// anything is bad or missing.
#include <fcntl.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "shared/base/file.h"
#include "shared/base/hash.h"
#include "shared/base/progress.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/integrity.h"
#include "shared/checkpoint/manifest.h"
#include "tools/k3ctl/commands.h"

namespace k3::tools {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct ModelArgs {
  std::string model;
  std::vector<std::string> shard_dirs;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  bool direct = true;
  bool strict = false;
};

void add_model_args(CLI::App* cmd, ModelArgs& a) {
  cmd->add_option("--model", a.model, "model directory (config.json, index)")->required();
  cmd->add_option("--shard-dir", a.shard_dirs, "extra shard directory (repeatable)");
  cmd->add_option("--threads", a.threads, "reader threads (default: cores)")
      ->check(CLI::Range(1, 256));
  cmd->add_flag("!--no-direct", a.direct, "buffered reads instead of O_DIRECT");
  cmd->add_flag("--strict", a.strict,
                "refuse a snapshot whose index names missing shards, even of tensors the model "
                "does not use (default: warn)");
}

// Opens the checkpoint for manifest / verify: a warning per missing shard of
// tensors the model does not use, refused under --strict.
StatusOr<std::unique_ptr<checkpoint::Checkpoint>> open_checkpoint(const char* command,
                                                                  const ModelArgs& a) {
  K3_ASSIGN_OR_RETURN(auto ck, checkpoint::Checkpoint::open(a.model, a.shard_dirs));
  for (const std::string& w : ck->missing_shard_warnings())
    std::fprintf(stderr, "k3ctl %s: warning: %s\n", command, w.c_str());
  if (a.strict) K3_RETURN_IF_ERROR(ck->refuse_missing_shards());
  return ck;
}

bool same_or_inside(const fs::path& p, const fs::path& dir) {
  std::error_code ec;
  const fs::path a = fs::weakly_canonical(p, ec), d = fs::weakly_canonical(dir, ec);
  auto it = a.begin();
  for (auto dt = d.begin(); dt != d.end(); ++dt, ++it)
    if (it == a.end() || *it != *dt) return false;
  return true;
}

bool same_key(const checkpoint::ManifestEntry& a, const checkpoint::ManifestEntry& b) {
  return a.kind == b.kind && a.name == b.name && a.layer == b.layer && a.id == b.id &&
         a.dtype == b.dtype && a.shape == b.shape && a.bytes == b.bytes;
}

// Runs fn(i, hasher) for i in [begin, items) on `threads` threads, each with
// its own SpanHasher; `done(i, result)` is called in index order, on whichever
// thread completes the next index, under a lock.
using ItemResult = StatusOr<base::Hash128>;
Status for_each_item(const checkpoint::Checkpoint& ck,
                     const std::vector<checkpoint::IntegrityItem>& items, size_t begin,
                     const ModelArgs& a, base::Progress& progress, bool* direct_out,
                     const std::function<Status(size_t, const ItemResult&)>& done) {
  std::atomic<size_t> next{begin};
  std::mutex mu;
  std::map<size_t, ItemResult> finished;
  size_t emit = begin;
  Status first_error;
  std::atomic<bool> stop{false};
  std::atomic<bool> all_direct{true};
  auto worker = [&] {
    auto hasher = checkpoint::SpanHasher::create(ck, a.direct);
    if (!hasher.ok()) {
      std::lock_guard l(mu);
      if (first_error.ok()) first_error = hasher.status();
      stop = true;
      return;
    }
    if (!(*hasher)->direct()) all_direct = false;
    while (!stop) {
      const size_t i = next++;
      if (i >= items.size()) break;
      ItemResult r = (*hasher)->hash(items[i], [&](uint64_t n) { progress.advance(n); });
      std::lock_guard l(mu);
      finished.emplace(i, std::move(r));
      while (!finished.empty() && finished.begin()->first == emit) {
        Status s = done(emit, finished.begin()->second);
        finished.erase(finished.begin());
        ++emit;
        if (!s.ok()) {
          if (first_error.ok()) first_error = s;
          stop = true;
          break;
        }
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < a.threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  if (direct_out) *direct_out = all_direct;
  return first_error;
}

// The complete entry lines of a previous run's FILE.partial that match the
// plan, and the byte length they cover; 0 lines when it does not match.
struct Resume {
  size_t lines = 0;
  uint64_t bytes = 0;  // file length to keep
};
Resume resume_point(const std::string& partial, const std::string& header_line,
                    const std::vector<checkpoint::IntegrityItem>& items) {
  Resume r;
  auto text = base::read_small_file(partial, 1ull << 30);
  if (!text.ok()) return r;
  size_t pos = 0;
  const size_t nl = text->find('\n');
  if (nl == std::string::npos || text->substr(0, nl) != header_line) return r;
  pos = nl + 1;
  r.bytes = pos;
  while (r.lines < items.size()) {
    const size_t e = text->find('\n', pos);
    if (e == std::string::npos) break;  // a torn last line is written again
    auto entry =
        checkpoint::parse_manifest_entry(std::string_view(*text).substr(pos, e - pos), partial);
    if (!entry.ok() || !same_key(*entry, items[r.lines].entry)) break;
    pos = e + 1;
    r.bytes = pos;
    ++r.lines;
  }
  return r;
}

Status write_manifest(const ModelArgs& a, const std::string& out, bool force) {
  for (const std::string& d : [&] {
         std::vector<std::string> v = a.shard_dirs;
         v.push_back(a.model);
         return v;
       }())
    if (same_or_inside(fs::path(out), d))
      return absl::InvalidArgumentError(
          cat(out, " is inside the model directory ", d,
              "; the manifest must be written outside it (a model is never modified)"));
  if (fs::exists(out) && !force)
    return absl::AlreadyExistsError(cat(out, " exists; --force rewrites it"));
  K3_ASSIGN_OR_RETURN(auto ck, open_checkpoint("manifest", a));
  K3_ASSIGN_OR_RETURN(std::vector<checkpoint::IntegrityItem> items,
                      checkpoint::integrity_plan(*ck));
  const std::string header = checkpoint::manifest_header_line({ck->fingerprint(), items.size()});
  const std::string partial = out + ".partial";
  const Resume r = resume_point(partial, header, items);

  K3_ASSIGN_OR_RETURN(base::File f, base::File::open_write(partial));
  // Keep the complete lines of a previous run (or nothing), then go on.
  K3_RETURN_IF_ERROR(f.truncate(r.bytes));
  uint64_t pos = r.bytes;
  if (r.bytes == 0) {
    const std::string l = header + "\n";
    K3_RETURN_IF_ERROR(f.pwrite_all(l.data(), l.size(), 0));
    pos = l.size();
  }
  uint64_t total = 0, skipped = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    total += items[i].entry.bytes;
    if (i < r.lines) skipped += items[i].entry.bytes;
  }
  if (r.lines > 0)
    std::fprintf(stderr, "k3ctl manifest: resuming %s after %zu of %zu entries\n", partial.c_str(),
                 r.lines, items.size());
  base::Progress progress("manifest", total);
  progress.skip(skipped);
  auto last_sync = Clock::now();
  K3_RETURN_IF_ERROR(
      for_each_item(*ck, items, r.lines, a, progress, nullptr, [&](size_t i, const ItemResult& h) {
        if (!h.ok()) return h.status();
        checkpoint::ManifestEntry e = items[i].entry;
        e.hash = *h;
        const std::string l = checkpoint::manifest_entry_line(e) + "\n";
        K3_RETURN_IF_ERROR(f.pwrite_all(l.data(), l.size(), pos));
        pos += l.size();
        if (Clock::now() - last_sync > std::chrono::seconds(2)) {
          ::fdatasync(f.fd());  // a crash loses at most a few seconds of hashing
          last_sync = Clock::now();
        }
        return absl::OkStatus();
      }));
  progress.finish();
  if (::fsync(f.fd()) != 0) return absl::InternalError(cat(partial, ": fsync failed"));
  std::error_code ec;
  fs::rename(partial, out, ec);
  if (ec) return absl::InternalError(cat("rename ", partial, " -> ", out, ": ", ec.message()));
  std::printf("%s\n", json({{"manifest", out},
                            {"entries", items.size()},
                            {"bytes", total},
                            {"resumed_entries", r.lines},
                            {"model_fingerprint", base::hex64(ck->fingerprint())}})
                          .dump()
                          .c_str());
  return absl::OkStatus();
}

struct VerifyArgs {
  std::string manifest, sha256;
};

// Per-file SHA-256 of a sha256sum-format list. Returns the count of problems.
StatusOr<int> verify_sha256(const ModelArgs& a, const std::string& list) {
  K3_ASSIGN_OR_RETURN(std::string text, base::read_small_file(list, 64u << 20));
  struct Want {
    std::string name, hex, path;
  };
  std::vector<Want> wants;
  size_t pos = 0;
  int line_no = 0, bad = 0;
  while (pos < text.size()) {
    size_t nl = text.find('\n', pos);
    if (nl == std::string::npos) nl = text.size();
    std::string line = text.substr(pos, nl - pos);
    pos = nl + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.empty()) continue;
    // "<64 hex><space><space or *><name>"
    if (line.size() < 67 || line[64] != ' ' || (line[65] != ' ' && line[65] != '*'))
      return absl::InvalidArgumentError(
          cat(list, ":", line_no, ": not a sha256sum line (\"HASH  NAME\")"));
    Want w{line.substr(66), line.substr(0, 64), ""};
    for (char& c : w.hex) {
      c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      if (!std::isxdigit(static_cast<unsigned char>(c)))
        return absl::InvalidArgumentError(cat(list, ":", line_no, ": the hash is not hex"));
    }
    const fs::path rel = fs::path(w.name).lexically_normal();
    if (rel.is_absolute() || rel.empty() || *rel.begin() == "..")
      return absl::InvalidArgumentError(
          cat(list, ":", line_no, ": '", w.name, "' is not a path inside the model"));
    std::vector<std::string> dirs = {a.model};
    dirs.insert(dirs.end(), a.shard_dirs.begin(), a.shard_dirs.end());
    for (const std::string& d : dirs)
      if (fs::is_regular_file(fs::path(d) / rel)) {
        w.path = (fs::path(d) / rel).string();
        break;
      }
    wants.push_back(std::move(w));
  }
  // Shards of tensors the model does not use may be absent (a snapshot
  // without its vision shards), unless --strict.
  std::set<std::string> optional;
  if (!a.strict)
    if (auto ck =
            checkpoint::Checkpoint::open(a.model, a.shard_dirs, checkpoint::ShardPolicy::kPresent);
        ck.ok())
      for (const checkpoint::MissingShard& m : (*ck)->missing_unused_shards())
        optional.insert(m.shard);
  uint64_t total = 0;
  for (const Want& w : wants)
    if (!w.path.empty()) total += fs::file_size(w.path);
  base::Progress progress("sha256", total);
  std::atomic<size_t> next{0};
  std::mutex mu;
  auto worker = [&] {
    std::vector<char> buf(8u << 20);
    for (size_t i; (i = next++) < wants.size();) {
      const Want& w = wants[i];
      std::string problem;
      if (w.path.empty() && optional.count(fs::path(w.name).lexically_normal().string())) {
        std::lock_guard l(mu);
        std::fprintf(
            stderr,
            "k3ctl verify: warning: %s is absent; it holds only tensors the model does not use\n",
            w.name.c_str());
        std::printf("%s\n", json({{"absent_unused_file", w.name}}).dump().c_str());
        continue;
      }
      if (w.path.empty()) {
        problem = "missing";
      } else {
        auto f = base::File::open_read(w.path);
        if (!f.ok()) {
          problem = msg(f.status());
        } else {
          base::Sha256Stream h;
          const uint64_t size = f->size();
          for (uint64_t p = 0; p < size && problem.empty();) {
            const uint64_t n = std::min<uint64_t>(buf.size(), size - p);
            if (Status s = f->pread_exact(buf.data(), n, p); !s.ok()) problem = msg(s);
            h.update(buf.data(), n);
            progress.advance(n);
            p += n;
          }
          if (problem.empty() && h.hex_digest() != w.hex) problem = "sha256 mismatch";
        }
      }
      if (!problem.empty()) {
        std::lock_guard l(mu);
        ++bad;
        std::printf("%s\n", json({{"bad_file", w.name}, {"reason", problem}}).dump().c_str());
      }
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < a.threads; ++t) pool.emplace_back(worker);
  for (auto& t : pool) t.join();
  progress.finish();
  std::printf("%s\n", json({{"sha256_files", wants.size()}, {"bad_files", bad}}).dump().c_str());
  return bad;
}

StatusOr<int> verify_manifest(const ModelArgs& a, const VerifyArgs& v) {
  K3_ASSIGN_OR_RETURN(checkpoint::Manifest m, checkpoint::Manifest::load(v.manifest));
  K3_ASSIGN_OR_RETURN(auto ck, open_checkpoint("verify", a));
  // Tensors of missing shards the model does not use: absent, not bad.
  std::set<std::string> absent_unused;
  for (const checkpoint::MissingShard& s : ck->missing_unused_shards())
    for (const std::string& t : s.tensors) absent_unused.insert(t);
  if (m.header().fingerprint != ck->fingerprint())
    return absl::FailedPreconditionError(
        cat(v.manifest, " is the manifest of another model (fingerprint ",
            base::hex64(m.header().fingerprint), ", this model's is ",
            base::hex64(ck->fingerprint()), ")"));
  K3_ASSIGN_OR_RETURN(std::vector<checkpoint::IntegrityItem> items,
                      checkpoint::integrity_plan(*ck));
  int bad = 0;
  auto report = [&](const checkpoint::IntegrityItem& it, const std::string& reason) {
    ++bad;
    json j = {
        {it.entry.kind == checkpoint::ManifestEntry::Kind::kExpert ? "bad_expert" : "bad_tensor",
         it.entry.name},
        {"reason", reason}};
    if (it.entry.kind == checkpoint::ManifestEntry::Kind::kExpert) {
      j["layer"] = it.entry.layer;
      j["expert"] = it.entry.id;
    }
    if (!it.spans.empty()) {
      j["file"] = ck->files()[it.spans.front().file];
      j["offset"] = it.spans.front().offset;
    }
    std::printf("%s\n", j.dump().c_str());
  };
  std::vector<const checkpoint::ManifestEntry*> want(items.size(), nullptr);
  uint64_t total = 0;
  size_t seen = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const checkpoint::ManifestEntry& e = items[i].entry;
    want[i] = e.kind == checkpoint::ManifestEntry::Kind::kExpert ? m.expert(e.layer, e.id)
                                                                 : m.tensor(e.name);
    if (want[i] != nullptr) ++seen;
    total += e.bytes;
  }
  base::Progress progress("verify", total);
  const auto t0 = Clock::now();
  bool direct = false;
  K3_RETURN_IF_ERROR(
      for_each_item(*ck, items, 0, a, progress, &direct, [&](size_t i, const ItemResult& h) {
        const checkpoint::IntegrityItem& it = items[i];
        if (want[i] == nullptr) {
          report(it, "not in the manifest");
        } else if (!same_key(*want[i], it.entry) || want[i]->kind != it.entry.kind) {
          report(it, cat("stored as ", it.entry.dtype, " ", json(it.entry.shape).dump(), ", ",
                         it.entry.bytes, " bytes; the manifest has ", want[i]->dtype, " ",
                         json(want[i]->shape).dump(), ", ", want[i]->bytes, " bytes"));
        } else if (!h.ok()) {
          report(it, msg(h.status()));
        } else if (!(*h == want[i]->hash)) {
          report(it,
                 cat("xxh3-128 mismatch: ", h->hex(), ", the manifest has ", want[i]->hash.hex()));
        }
        return absl::OkStatus();
      }));
  progress.finish();
  const double secs = std::chrono::duration<double>(Clock::now() - t0).count();
  size_t missing = m.entries().size() - seen, absent = 0;
  if (missing > 0) {
    const std::set<const checkpoint::ManifestEntry*> held(want.begin(), want.end());
    for (const checkpoint::ManifestEntry& e : m.entries()) {
      if (held.count(&e)) continue;
      const bool expert = e.kind == checkpoint::ManifestEntry::Kind::kExpert;
      const bool unused = !expert && absent_unused.count(e.name) > 0;
      absent += unused;
      std::printf("%s\n", json({{expert   ? "missing_expert"
                                 : unused ? "absent_unused_tensor"
                                          : "missing_tensor",
                                 e.name}})
                              .dump()
                              .c_str());
    }
    missing -= absent;
  }
  std::printf("%s\n", json({{"verified", items.size()},
                            {"bad", bad},
                            {"missing", missing},
                            {"absent_unused", absent},
                            {"bytes", total},
                            {"seconds", secs},
                            {"gb_per_s", secs > 0 ? static_cast<double>(total) / secs / 1e9 : 0},
                            {"direct", direct}})
                          .dump()
                          .c_str());
  return bad + static_cast<int>(missing);
}

void add_manifest_command(CLI::App& app) {
  auto a = std::make_shared<ModelArgs>();
  auto out = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  auto* cmd = app.add_subcommand(
      "manifest", "write a per-tensor and per-expert XXH3-128 manifest (JSON lines; resumable)");
  add_model_args(cmd, *a);
  cmd->add_option("--out", *out, "manifest file, outside the model directories")->required();
  cmd->add_flag("--force", *force, "rewrite an existing manifest");
  cmd->callback([a, out, force] {
    if (Status s = write_manifest(*a, *out, *force); !s.ok()) fail(msg(s));
  });
}

void add_verify_command(CLI::App& app) {
  auto a = std::make_shared<ModelArgs>();
  auto v = std::make_shared<VerifyArgs>();
  auto* cmd = app.add_subcommand(
      "verify", "check every byte against a manifest and/or files against a sha256sum list");
  add_model_args(cmd, *a);
  cmd->add_option("--manifest", v->manifest, "manifest written by k3ctl manifest");
  cmd->add_option("--sha256", v->sha256, "sha256sum-format list of the model's files");
  cmd->callback([a, v] {
    if (v->manifest.empty() && v->sha256.empty())
      return fail("verify needs --manifest FILE, --sha256 FILE or both");
    int problems = 0;
    if (!v->sha256.empty()) {
      auto r = verify_sha256(*a, v->sha256);
      if (!r.ok()) return fail(msg(r.status()));
      problems += *r;
    }
    if (!v->manifest.empty()) {
      auto r = verify_manifest(*a, *v);
      if (!r.ok()) return fail(msg(r.status()));
      problems += *r;
    }
    if (problems > 0) fail(cat("verify: ", problems, " problem(s) found"));
  });
}

const CommandRegistrar kManifest(add_manifest_command);
const CommandRegistrar kVerify(add_verify_command);

}  // namespace
}  // namespace k3::tools
