// `k3ctl place`: spread a model's routed experts over drives so that every
// layer reads from all of them (shared/checkpoint/drive_layout.h), and
// with --apply write each drive's part.
//
//   k3ctl place --model DIR [--shard-dir D ...] --drives D1,D2,... [--replicas N]
//               [--apply] [--file-gb G] [--limit-mbps M]
//
// Prints the plan (bytes and free space per drive) as one JSON line. --apply
// writes, per drive: spec-valid safetensors files holding that drive's
// experts byte-identical (the six tensors of an expert back to back, one read
// serves it) in (layer, id) order, each stamped with the model's fingerprint
// (shared/checkpoint/model_identity.h), that drive's
// model.safetensors.index.json and the model's config.json, so
// `expertd --model DRIVE` serves exactly those experts. Each file is written
// as NAME.partial and renamed when complete; a run killed at any point resumes
// (complete files of this model are kept, a partial file keeps its complete
// tensors; a complete file of another model is refused). The source is only
// read.
#include <sys/statvfs.h>

#include <chrono>
#include <cstdio>
#include <filesystem>
#include <map>
#include <memory>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "shared/base/file.h"
#include "shared/base/hash.h"
#include "shared/base/progress.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/drive_layout.h"
#include "shared/checkpoint/model_identity.h"
#include "shared/checkpoint/model_tensors.h"
#include "shared/checkpoint/safetensors.h"
#include "shared/checkpoint/safetensors_writer.h"
#include "tools/k3ctl/commands.h"

namespace k3::tools {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct PlaceArgs {
  std::string model;
  std::vector<std::string> shard_dirs;
  std::vector<std::string> drives;
  int replicas = 1;
  bool apply = false;
  double file_gb = 4;
  double limit_mbps = 0;
  bool strict = false;  // refuse missing shards, even of tensors the model does not use
};

// One output file: its name and the experts it holds.
struct PlannedFile {
  std::string name;
  std::vector<std::pair<int64_t, int64_t>> experts;
  bool complete = false;  // already on the drive, as this plan writes it
};

std::vector<PlannedFile> files_of(const checkpoint::DriveLayout& p, int d, double file_gb) {
  const auto experts = p.experts_of(d);
  const size_t per_file =
      std::max<size_t>(1, static_cast<size_t>(file_gb * 1e9 / static_cast<double>(p.expert_bytes)));
  const size_t n = (experts.size() + per_file - 1) / per_file;
  std::vector<PlannedFile> out;
  for (size_t k = 0; k < n; ++k) {
    char name[96];
    std::snprintf(name, sizeof name, "experts-d%02d-%05zu-of-%05zu.safetensors", d, k + 1, n);
    PlannedFile f{name, {}};
    for (size_t i = k * per_file; i < std::min(experts.size(), (k + 1) * per_file); ++i)
      f.experts.push_back(experts[i]);
    out.push_back(std::move(f));
  }
  return out;
}

std::vector<checkpoint::SafetensorsWriter::Entry> entries_of(const checkpoint::Checkpoint& ck,
                                                             const checkpoint::ModelConfig& c,
                                                             const PlannedFile& f) {
  std::vector<checkpoint::SafetensorsWriter::Entry> out;
  for (const auto& [l, e] : f.experts)
    for (const checkpoint::ExpectedTensor& t : checkpoint::expert_tensors(c, l, e))
      out.push_back({ck.prefix() + t.name, checkpoint::DType::kU8, t.shape});
  return out;
}

// Every file's header metadata: the source's identity
// (shared/checkpoint/model_identity.h) travels with the experts.
std::map<std::string, std::string> file_metadata(const checkpoint::Checkpoint& ck) {
  return {{"format", "pt"}, {checkpoint::kFingerprintMetadataKey, base::hex64(ck.fingerprint())}};
}

// True when `path` is a complete file of exactly this table, of this model.
bool complete_file(const std::string& path,
                   const std::vector<checkpoint::SafetensorsWriter::Entry>& want,
                   const std::map<std::string, std::string>& metadata) {
  auto h = checkpoint::read_safetensors_header(path);
  if (!h.ok() || h->tensors.size() != want.size() || h->metadata != metadata) return false;
  std::map<std::string, const checkpoint::TensorInfo*> by_name;
  for (const checkpoint::TensorInfo& t : h->tensors) by_name[t.name] = &t;
  for (const auto& w : want) {
    auto it = by_name.find(w.name);
    if (it == by_name.end() || it->second->dtype != w.dtype || it->second->shape != w.shape)
      return false;
  }
  return true;
}

uint64_t free_bytes(const std::string& dir) {
  struct statvfs s;
  if (::statvfs(dir.c_str(), &s) != 0) return 0;
  return static_cast<uint64_t>(s.f_bavail) * s.f_frsize;
}

Status check_drives(const PlaceArgs& a) {
  std::set<fs::path> seen;
  std::vector<fs::path> source = {fs::weakly_canonical(a.model)};
  for (const std::string& d : a.shard_dirs) source.push_back(fs::weakly_canonical(d));
  for (const std::string& d : a.drives) {
    if (d.empty()) return absl::InvalidArgumentError("--drives names an empty directory");
    const fs::path p = fs::weakly_canonical(d);
    if (!seen.insert(p).second)
      return absl::InvalidArgumentError(cat("--drives names ", d, " twice"));
    for (const fs::path& s : source)
      if (p == s)
        return absl::InvalidArgumentError(
            cat("drive ", d,
                " is a directory of the source model; its index and config would be "
                "overwritten (use a directory of its own)"));
  }
  return absl::OkStatus();
}

Status run_place(const PlaceArgs& a) {
  K3_RETURN_IF_ERROR(check_drives(a));
  K3_ASSIGN_OR_RETURN(checkpoint::ModelConfig c, checkpoint::load_model_config(a.model));
  K3_ASSIGN_OR_RETURN(auto ck, checkpoint::Checkpoint::open(a.model, a.shard_dirs));
  // A snapshot without its vision shards: the experts are all there.
  for (const std::string& w : ck->missing_shard_warnings())
    std::fprintf(stderr, "k3ctl place: warning: %s\n", w.c_str());
  if (a.strict) K3_RETURN_IF_ERROR(ck->refuse_missing_shards());
  K3_ASSIGN_OR_RETURN(std::string config_text,
                      base::read_small_file(a.model + "/config.json", 16u << 20));
  K3_ASSIGN_OR_RETURN(
      checkpoint::DriveLayout p,
      checkpoint::plan_drive_layout(c, static_cast<int>(a.drives.size()), a.replicas));
  // Every expert tensor must be in the source with the size the config implies.
  for (int64_t l = p.first_moe_layer; l < p.first_moe_layer + p.num_moe_layers; ++l)
    for (int64_t e = 0; e < p.num_experts; ++e)
      for (const checkpoint::ExpectedTensor& t : checkpoint::expert_tensors(c, l, e)) {
        K3_ASSIGN_OR_RETURN(const checkpoint::TensorInfo* ti, ck->get(t.name));
        uint64_t n = 1;
        for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
        if (ti->dtype != checkpoint::DType::kU8 || ti->nbytes != n)
          return absl::InvalidArgumentError(cat(ck->files()[ti->file], ": tensor '", ti->name,
                                                "' is not the U8 tensor of ", n,
                                                " bytes the config implies"));
      }

  // The plan, and what is already in place.
  json drives = json::array();
  std::vector<std::vector<PlannedFile>> files(a.drives.size());
  uint64_t to_write = 0;
  for (size_t d = 0; d < a.drives.size(); ++d) {
    files[d] = files_of(p, static_cast<int>(d), a.file_gb);
    uint64_t done = 0;
    for (PlannedFile& f : files[d]) {
      f.complete =
          complete_file(a.drives[d] + "/" + f.name, entries_of(*ck, c, f), file_metadata(*ck));
      if (f.complete) done += f.experts.size() * p.expert_bytes;
    }
    const uint64_t bytes = p.bytes_of(static_cast<int>(d));
    const uint64_t avail = fs::is_directory(a.drives[d]) ? free_bytes(a.drives[d]) : 0;
    to_write += bytes - done;
    drives.push_back({{"drive", a.drives[d]},
                      {"experts", p.experts_of(static_cast<int>(d)).size()},
                      {"bytes", bytes},
                      {"bytes_in_place", done},
                      {"free_bytes", avail},
                      {"exists", fs::is_directory(a.drives[d])},
                      {"fits", fs::is_directory(a.drives[d]) && bytes - done <= avail},
                      {"files", files[d].size()}});
  }
  json plan = {{"model", a.model},
               {"drives", drives},
               {"replicas", a.replicas},
               {"moe_layers", p.num_moe_layers},
               {"experts_per_layer", p.num_experts},
               {"expert_bytes", p.expert_bytes},
               {"experts_per_drive_per_layer", {p.min_per_layer(), p.max_per_layer()}},
               {"apply", a.apply}};
  if (!a.apply) {
    std::printf("%s\n", plan.dump().c_str());
    return absl::OkStatus();
  }
  for (const json& d : drives) {
    if (!d["exists"].get<bool>())
      return absl::NotFoundError(
          cat("drive ", d["drive"].get<std::string>(), " is not a directory (mount it first)"));
    if (!d["fits"].get<bool>())
      return absl::ResourceExhaustedError(
          cat("drive ", d["drive"].get<std::string>(), " needs ",
              d["bytes"].get<uint64_t>() - d["bytes_in_place"].get<uint64_t>(), " bytes, has ",
              d["free_bytes"].get<uint64_t>(), " free"));
  }

  base::Progress progress("place", to_write);
  std::vector<uint8_t> buf(p.expert_bytes);
  uint64_t written = 0, resumed = 0;
  int kept_files = 0;
  const auto t0 = Clock::now();
  for (size_t d = 0; d < a.drives.size(); ++d) {
    json weight_map = json::object();
    uint64_t total = 0;
    for (const PlannedFile& f : files[d]) {
      const std::string path = a.drives[d] + "/" + f.name;
      std::vector<checkpoint::SafetensorsWriter::Entry> entries = entries_of(*ck, c, f);
      for (const auto& e : entries) weight_map[e.name] = f.name;
      total += f.experts.size() * p.expert_bytes;
      if (f.complete) {
        ++kept_files;
        continue;
      }
      if (fs::exists(path))
        return absl::AlreadyExistsError(
            cat(path,
                " exists and is not the file this plan writes (another table, or of another "
                "model); remove it to place again"));
      K3_ASSIGN_OR_RETURN(auto w,
                          checkpoint::SafetensorsWriter::resume(path, entries, file_metadata(*ck)));
      resumed += w->resumed_bytes();
      progress.advance(w->resumed_bytes());
      for (size_t i = w->current() / 6; i < f.experts.size(); ++i) {
        const auto [l, e] = f.experts[i];
        const std::vector<checkpoint::ExpectedTensor> six = checkpoint::expert_tensors(c, l, e);
        for (size_t k = 0; k < six.size(); ++k) {
          if (i * 6 + k < w->current()) continue;  // kept from the interrupted run
          K3_ASSIGN_OR_RETURN(const checkpoint::TensorInfo* t, ck->get(six[k].name));
          K3_RETURN_IF_ERROR(ck->read_bytes(*t, 0, t->nbytes, buf.data()));
          K3_RETURN_IF_ERROR(w->write(buf.data(), t->nbytes));
          written += t->nbytes;
          progress.advance(t->nbytes);
        }
        K3_RETURN_IF_ERROR(w->flush());  // a kill loses at most this expert
        if (a.limit_mbps > 0) {          // keep the drives' bandwidth for serving
          const double due = static_cast<double>(written) / (a.limit_mbps * 1e6);
          const double now = std::chrono::duration<double>(Clock::now() - t0).count();
          if (due > now) std::this_thread::sleep_for(std::chrono::duration<double>(due - now));
        }
      }
      K3_RETURN_IF_ERROR(w->finish());
    }
    json index = {
        {"metadata",
         {{"total_size", total},
          {"k3_placement", {{"drive", d}, {"drives", a.drives.size()}, {"replicas", a.replicas}}}}},
        {"weight_map", weight_map}};
    K3_RETURN_IF_ERROR(base::write_file_atomic(a.drives[d] + "/model.safetensors.index.json",
                                               index.dump(1) + "\n"));
    K3_RETURN_IF_ERROR(base::write_file_atomic(a.drives[d] + "/config.json", config_text));
  }
  progress.finish();
  plan["written_bytes"] = written;
  plan["resumed_bytes"] = resumed;
  plan["files_already_complete"] = kept_files;
  plan["seconds"] = std::chrono::duration<double>(Clock::now() - t0).count();
  std::printf("%s\n", plan.dump().c_str());
  return absl::OkStatus();
}

void add_place_command(CLI::App& app) {
  auto a = std::make_shared<PlaceArgs>();
  auto* cmd = app.add_subcommand(
      "place",
      "spread the routed experts over drives, every layer over all of them (--apply writes)");
  cmd->add_option("--model", a->model, "source model directory (config.json, index)")->required();
  cmd->add_option("--shard-dir", a->shard_dirs, "extra source shard directory (repeatable)");
  cmd->add_option("--drives", a->drives, "drive directories, comma-separated")
      ->required()
      ->delimiter(',');
  cmd->add_option("--replicas", a->replicas, "drives holding each expert (default 1)")
      ->check(CLI::Range(1, 64));
  cmd->add_flag("--apply", a->apply, "write the drives' files (default: print the plan only)");
  cmd->add_flag("--strict", a->strict,
                "refuse a source whose index names missing shards, even of tensors the model "
                "does not use (default: warn)");
  cmd->add_option("--file-gb", a->file_gb, "largest output file, GB (default 4)")
      ->check(CLI::Range(0.001, 1e6));
  cmd->add_option("--limit-mbps", a->limit_mbps,
                  "cap the copy rate, MB/s, to leave bandwidth for serving (default 0: none)")
      ->check(CLI::Range(0.0, 1e7));
  cmd->callback([a] {
    if (Status s = run_place(*a); !s.ok()) fail(msg(s));
  });
}

const CommandRegistrar kPlace(add_place_command);

}  // namespace
}  // namespace k3::tools
