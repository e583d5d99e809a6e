// `k3ctl doctor`: checks what a deployment needs on this machine and prints a
// plan, one line per check (ok / warn / fail, what was found, the fix); exits
// 1 when anything fails.
//
//   k3ctl doctor [--model DIR] [--drive DIR ...] [--cache-gb G] [--segment-dir DIR]
//                [--dense-bits N --mla-bits N --head-bits N] [--units-dir DIR] [--json]
//
// Checks: CPU kernel variants, cores, RAM (the cgroup's limit inside a
// container) against the dense part at the chosen bits, the segment filesystem (/dev/shm) against
// --cache-gb, hugepages, io_uring (and the systemd units' system-call filter, read from the unit
// files: PID 1 need not be systemd), per drive free space and its O_DIRECT read rate through
// io_uring (drive_probe.h: a shard of at least 256 MB, else a temporary file of that size), and
// the open-file limit. Then the plan (deployment_plan.h): expertd's cache, the drives' rates,
// the decode s/token those rates give on this model, what fits in RAM.
#include <fcntl.h>
#include <liburing.h>
#include <sys/resource.h>
#include <sys/statvfs.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <thread>
#include <tuple>

#include <nlohmann/json.hpp>

#include "shared/base/cpu_features.h"
#include "shared/base/file.h"
#include "shared/checkpoint/checkpoint.h"
#include "shared/checkpoint/container.h"
#include "shared/checkpoint/model_config.h"
#include "shared/checkpoint/model_tensors.h"
#include "shared/kernels/dense.h"
#include "tools/k3ctl/commands.h"
#include "tools/k3ctl/deployment_plan.h"
#include "tools/k3ctl/drive_probe.h"

namespace k3::tools {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using Clock = std::chrono::steady_clock;

struct DoctorArgs {
  std::string model;
  std::vector<std::string> drives;
  double cache_gb = 0;
  std::string segment_dir = "/dev/shm";
  int dense_bits = 4, mla_bits = 8, head_bits = 8;
  std::string units_dir = "/etc/systemd/system";
  std::string cgroup_root = "/sys/fs/cgroup";
  bool json_out = false;
  double read_seconds = 3.0;
  int test_file_mb = 256;
};

// What the checks found that the plan needs.
struct Findings {
  uint64_t ram_total = 0, ram_available = 0, segment_free = 0;
  std::optional<PlanModel> model;  // from --model's config
  std::vector<PlanDrive> drives;
};

struct Check {
  std::string name, status, detail, fix;
};

class Report {
 public:
  void plan(const Plan& p) { plan_ = p.lines; }
  void ok(std::string name, std::string detail) {
    add({std::move(name), "ok", std::move(detail), ""});
  }
  void warn(std::string name, std::string detail, std::string fix) {
    add({std::move(name), "warn", std::move(detail), std::move(fix)});
  }
  void fail(std::string name, std::string detail, std::string fix) {
    add({std::move(name), "fail", std::move(detail), std::move(fix)});
  }
  bool failed() const {
    for (const Check& c : checks_)
      if (c.status == "fail") return true;
    return false;
  }
  // The checks, then the plan: in JSON one object per line, the plan's as
  // {"check": "plan NAME", "status": "plan", "detail": ..., "plan": {figures}}.
  void print(bool as_json) const {
    for (const Check& c : checks_) {
      if (as_json) {
        json j = {{"check", c.name}, {"status", c.status}, {"detail", c.detail}};
        if (!c.fix.empty()) j["fix"] = c.fix;
        std::printf("%s\n", j.dump().c_str());
      } else {
        std::printf("%-5s %-22s %s\n", c.status.c_str(), c.name.c_str(), c.detail.c_str());
        if (!c.fix.empty()) std::printf("      %-22s fix: %s\n", "", c.fix.c_str());
      }
    }
    if (!as_json && !plan_.empty()) std::printf("\nplan\n");
    for (const PlanLine& l : plan_) {
      if (as_json)
        std::printf("%s\n", json({{"check", "plan " + l.name},
                                  {"status", "plan"},
                                  {"detail", l.detail},
                                  {"plan", l.fields}})
                                .dump()
                                .c_str());
      else
        std::printf("      %-22s %s\n", l.name.c_str(), l.detail.c_str());
    }
  }

 private:
  void add(Check c) { checks_.push_back(std::move(c)); }
  std::vector<Check> checks_;
  std::vector<PlanLine> plan_;
};

std::string gb(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.2f GB", bytes / 1e9);
  return buf;
}

// /proc/meminfo field in bytes (its values are kB), 0 when absent.
uint64_t meminfo(const std::string& field) {
  std::ifstream in("/proc/meminfo");
  for (std::string line; std::getline(in, line);) {
    if (line.compare(0, field.size() + 1, field + ":") != 0) continue;
    std::istringstream s(line.substr(field.size() + 1));
    uint64_t v = 0;
    std::string unit;
    s >> v >> unit;
    return unit == "kB" ? v * 1024 : v;
  }
  return 0;
}

// RAM the engine's dense weights take at these bits: each matrix of the
// tensor table at its group's bits (as engined/model/weights.cpp binds them,
// sized as kernels::DenseMatrix holds them), the embedding as stored, the
// small tensors in f32.
uint64_t dense_ram_bytes(const checkpoint::ModelConfig& c, int dense_bits, int mla_bits,
                         int head_bits) {
  uint64_t total = 0;
  for (const checkpoint::ExpectedTensor& t : checkpoint::dense_tensors(c)) {
    uint64_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<uint64_t>(d);
    if (t.role == checkpoint::TensorRole::kEmbed) {
      total += n * 2;  // BF16 rows, converted per token
    } else if (t.quant != checkpoint::QuantGroup::kNone && t.shape.size() == 2) {
      const int bits = t.quant == checkpoint::QuantGroup::kMla    ? mla_bits
                       : t.quant == checkpoint::QuantGroup::kHead ? head_bits
                                                                  : dense_bits;
      total += kernels::DenseMatrix::bytes_for(bits, t.shape[0], t.shape[1]);
    } else {
      total += n * 4;
    }
  }
  return total;
}

// "use fewer bits (--dense-bits 4: N GB)" when fewer bits than asked would
// fit the dense part in `avail`, naming the first setting that does (dense
// bits lowered first, then MLA, then the head); "" when every setting is
// already at 4 bits or none fits.
std::string fewer_bits_hint(const DoctorArgs& a, const checkpoint::ModelConfig& c, uint64_t avail) {
  struct Bits {
    int dense, mla, head;
  };
  for (Bits b : {Bits{4, a.mla_bits, a.head_bits}, Bits{4, 4, a.head_bits}, Bits{4, 4, 4}}) {
    if (b.dense == a.dense_bits && b.mla == a.mla_bits && b.head == a.head_bits) continue;
    if (b.dense > a.dense_bits || b.mla > a.mla_bits || b.head > a.head_bits) continue;
    const uint64_t need = dense_ram_bytes(c, b.dense, b.mla, b.head);
    if (need > avail) continue;
    std::string flags;
    if (b.dense != a.dense_bits) flags += cat("--dense-bits ", b.dense);
    if (b.mla != a.mla_bits) flags += cat(flags.empty() ? "" : " ", "--mla-bits ", b.mla);
    if (b.head != a.head_bits) flags += cat(flags.empty() ? "" : " ", "--head-bits ", b.head);
    return cat("use fewer bits (", flags, ": ", gb(static_cast<double>(need)), ")");
  }
  return "";
}

void check_cpu(Report& r) {
  std::string have;
  for (base::KernelIsa isa : base::supported_kernel_isas())
    have += std::string(have.empty() ? "" : ", ") + std::string(base::kernel_isa_name(isa));
  if (Status s = base::kernel_isa_status(); !s.ok())
    r.fail("cpu kernels", msg(s), "unset K3_KERNELS or set it to one of: " + have);
  else if (base::cpu_supports_avx512())
    r.ok("cpu kernels", "avx512 in use (available: " + have + ")");
  else if (base::cpu_supports_avx2())
    r.warn("cpu kernels", "avx2 in use (available: " + have + ")",
           "a CPU with AVX-512 VNNI computes experts faster");
  else
    r.warn("cpu kernels", "scalar kernels only: no AVX2/FMA/F16C",
           "expect decode to be compute-bound; use an x86-64 CPU with AVX2 or AVX-512");
  cpu_set_t set;
  const long online = sysconf(_SC_NPROCESSORS_ONLN);
  const int usable =
      sched_getaffinity(0, sizeof set, &set) == 0 ? CPU_COUNT(&set) : static_cast<int>(online);
  const std::string detail = std::to_string(usable) + " usable of " + std::to_string(online);
  if (usable < 4)
    r.warn("cores", detail, "engined's OpenMP threads want 8 or more cores for the dense stack");
  else
    r.ok("cores", detail);
}

// The memory limit of the cgroup this process runs in (a container's RAM),
// when it has one below `total`: the tightest limit on the path from its
// cgroup up to the root (v2 memory.max, v1 memory.limit_in_bytes) and the usage
// at that level.
struct CgroupMemory {
  uint64_t limit = 0, usage = 0;
  std::string file;  // where the limit was read
};
std::optional<CgroupMemory> cgroup_memory(const std::string& root, uint64_t total) {
  auto read_number = [](const fs::path& p) -> std::optional<uint64_t> {
    std::ifstream in(p);
    std::string v;
    if (!(in >> v) || v == "max") return std::nullopt;
    char* end = nullptr;
    const unsigned long long n = std::strtoull(v.c_str(), &end, 10);
    if (end == v.c_str() || *end != '\0') return std::nullopt;
    return static_cast<uint64_t>(n);
  };
  std::optional<CgroupMemory> best;
  std::ifstream self("/proc/self/cgroup");
  for (std::string line; std::getline(self, line);) {
    // "0::PATH" (v2) or "N:memory,...:PATH" (v1).
    const size_t c1 = line.find(':'), c2 = line.find(':', c1 + 1);
    if (c1 == std::string::npos || c2 == std::string::npos) continue;
    const std::string controllers = line.substr(c1 + 1, c2 - c1 - 1);
    const bool v2 = line.substr(0, c1) == "0" && controllers.empty();
    const bool v1 = ("," + controllers + ",").find(",memory,") != std::string::npos;
    if (!v1 && !v2) continue;
    const fs::path base = v2 ? fs::path(root) : fs::path(root) / "memory";
    const char* limit_file = v2 ? "memory.max" : "memory.limit_in_bytes";
    const char* usage_file = v2 ? "memory.current" : "memory.usage_in_bytes";
    // Inside a container the path may not exist in its view: walk up.
    fs::path rel = fs::path(line.substr(c2 + 1)).relative_path();
    for (;;) {
      const fs::path dir = base / rel;
      if (std::optional<uint64_t> limit = read_number(dir / limit_file);
          limit && *limit < total && (!best || *limit < best->limit))
        best = CgroupMemory{*limit, read_number(dir / usage_file).value_or(0),
                            (dir / limit_file).string()};
      if (rel.empty()) break;
      rel = rel.parent_path();
    }
  }
  return best;
}

void check_memory(Report& r, const DoctorArgs& a, Findings& f) {
  uint64_t total = meminfo("MemTotal"), avail = meminfo("MemAvailable");
  std::string limited;
  if (std::optional<CgroupMemory> cg = cgroup_memory(a.cgroup_root, total)) {
    total = cg->limit;
    avail = std::min(avail, cg->limit > cg->usage ? cg->limit - cg->usage : 0);
    limited = cat(" (the cgroup limit, ", cg->file, ")");
  }
  f.ram_total = total;
  f.ram_available = avail;
  if (a.model.empty()) {
    r.ok("ram", gb(static_cast<double>(avail)) + " available of " + gb(static_cast<double>(total)) +
                    limited + " (no --model: dense part not sized)");
    return;
  }
  auto c = checkpoint::load_model_config(a.model);
  if (!c.ok()) {
    r.fail("model", msg(c.status()), "point --model at a directory with a valid config.json");
    return;
  }
  uint64_t need = dense_ram_bytes(*c, a.dense_bits, a.mla_bits, a.head_bits);
  PlanModel pm;
  pm.name = a.model;
  pm.moe_layers = c->num_moe_layers();
  pm.experts = c->num_experts;
  pm.top_k = c->num_experts_per_token;
  pm.expert_bytes = c->expert_bytes();
  pm.dense_bits = cat(a.dense_bits, "/", a.mla_bits, "/", a.head_bits);
  for (auto [d, m, h] : {std::tuple{4, 8, 8}, std::tuple{8, 8, 8}, std::tuple{32, 32, 32}})
    pm.dense_options.push_back({cat(d, "/", m, "/", h), dense_ram_bytes(*c, d, m, h)});
  std::string bits =
      cat("dense ", a.dense_bits, ", MLA ", a.mla_bits, ", head ", a.head_bits, " bits");
  // A repacked container says what it holds: its dense tensors as stored are
  // what engined keeps (copied, or with --mmap mapped read-only and shared).
  auto container = checkpoint::read_container_info(a.model);
  if (container.ok() && container->has_value()) {
    auto ck = checkpoint::Checkpoint::open(a.model, {}, checkpoint::ShardPolicy::kDense);
    if (ck.ok()) {
      need = 0;
      for (const checkpoint::TensorInfo& t : (*ck)->tensors())
        if (!checkpoint::is_routed_expert_tensor(t.name)) need += t.nbytes;
      bits = cat("the container's ", (*container)->dense_bits, "/", (*container)->mla_bits, "/",
                 (*container)->head_bits,
                 " bits (with --mmap mapped read-only and shared, without it private)");
      pm.dense_bits =
          cat((*container)->dense_bits, "/", (*container)->mla_bits, "/", (*container)->head_bits);
      pm.dense_options.clear();  // the container's bits are what it holds
      pm.dense_options.push_back({pm.dense_bits, need});
    }
  }
  pm.dense_bytes = need;
  f.model = pm;
  const std::string detail = cat("dense part ", gb(static_cast<double>(need)), " at ", bits, "; ",
                                 gb(static_cast<double>(avail)), " available of ",
                                 gb(static_cast<double>(total)), limited);
  if (need > avail) {
    // A container holds its bits: only the memory limit can change.
    const std::string fewer =
        container.ok() && container->has_value() ? "" : fewer_bits_hint(a, *c, avail);
    const std::string more =
        limited.empty() ? "a machine with more RAM" : "raise the container's memory limit";
    r.fail("ram", detail, fewer.empty() ? more : cat(fewer, " or ", more));
  } else if (need > avail * 8 / 10)
    r.warn("ram", detail, "little is left for KV caches, checkpoints and the page cache");
  else
    r.ok("ram", detail);
}

void check_segment(Report& r, const DoctorArgs& a, Findings& f) {
  struct statvfs s;
  if (::statvfs(a.segment_dir.c_str(), &s) != 0) {
    r.fail("segment dir", a.segment_dir + ": " + std::strerror(errno),
           "create it or pass --segment-dir");
    return;
  }
  const double size = static_cast<double>(s.f_blocks) * s.f_frsize;
  const double free = static_cast<double>(s.f_bavail) * s.f_frsize;
  f.segment_free = static_cast<uint64_t>(free);
  const std::string detail = a.segment_dir + ": " + gb(free) + " free of " + gb(size);
  if (a.cache_gb <= 0) {
    r.ok("segment dir", detail + " (no --cache-gb given)");
  } else if (a.cache_gb * 1e9 > free) {
    r.fail("segment dir", detail + cat(", expertd --cache-gb ", a.cache_gb, " does not fit"),
           "grow it (mount -o remount,size=NG " + a.segment_dir +
               ") or lower --cache-gb; a segment larger than its filesystem dies with SIGBUS");
  } else {
    r.ok("segment dir", detail + cat(", fits --cache-gb ", a.cache_gb));
  }
  const uint64_t hp_total = meminfo("HugePages_Total");  // a count (no unit)
  const uint64_t hp_size = meminfo("Hugepagesize");      // bytes
  if (hp_total == 0)
    r.ok("hugepages",
         cat("none reserved (", hp_size / 1024, " kB pages); the segment uses 4 kB pages"));
  else
    r.ok("hugepages",
         cat(hp_total, " pages of ", hp_size / 1024, " kB reserved, ", meminfo("HugePages_Free"),
             " free (mount hugetlbfs and pass "
             "--segment-dir to use them)"));
}

void check_io_uring(Report& r, const DoctorArgs& a) {
  io_uring ring;
  const int rc = io_uring_queue_init(8, &ring, 0);
  if (rc < 0) {
    std::string why = std::strerror(-rc);
    std::ifstream disabled("/proc/sys/kernel/io_uring_disabled");
    int d = 0;
    if (disabled >> d && d != 0) why += cat(" (kernel.io_uring_disabled = ", d, ")");
    r.fail("io_uring", "io_uring_queue_init failed: " + why,
           "expertd needs io_uring: a 5.10+ kernel with kernel.io_uring_disabled=0, and no "
           "seccomp filter that blocks it");
  } else {
    io_uring_queue_exit(&ring);
    r.ok("io_uring", "a ring can be set up");
  }
  // The units' system-call filter (PID 1 need not be systemd, so read the files).
  const fs::path unit = fs::path(a.units_dir) / "k3serve-expertd@.service";
  if (!fs::exists(unit)) {
    r.ok("systemd filter", unit.string() + " not installed (deploy/install-systemd.sh)");
    return;
  }
  // systemd's rules: the unit file then its drop-ins (NAME.d/*.conf, in
  // name order); an empty assignment resets the list; "~" starts a deny list.
  std::vector<fs::path> files = {unit};
  std::vector<fs::path> dropins;
  std::error_code ec;
  for (const auto& e : fs::directory_iterator(fs::path(unit.string() + ".d"), ec))
    if (e.path().extension() == ".conf") dropins.push_back(e.path());
  std::sort(dropins.begin(), dropins.end());
  files.insert(files.end(), dropins.begin(), dropins.end());
  bool base = false, uring = false, denied = false;
  for (const fs::path& f : files) {
    std::ifstream in(f);
    for (std::string line; std::getline(in, line);) {
      if (line.rfind("SystemCallFilter=", 0) != 0) continue;
      const std::string value = line.substr(std::strlen("SystemCallFilter="));
      if (value.find_first_not_of(" \t") == std::string::npos) {
        base = uring = denied = false;
        continue;
      }
      const bool has_uring = value.find("io_uring_setup") != std::string::npos &&
                             value.find("io_uring_enter") != std::string::npos &&
                             value.find("io_uring_register") != std::string::npos;
      if (value[value.find_first_not_of(" \t")] == '~') {
        denied |= value.find("io_uring") != std::string::npos;
        continue;
      }
      base |= value.find("@system-service") != std::string::npos;
      uring |= has_uring;
    }
  }
  if (denied) {
    r.fail("systemd filter", unit.string() + " (or a drop-in) denies io_uring system calls",
           "remove io_uring_* from the '~' SystemCallFilter= list");
    return;
  }
  if (base && !uring)
    r.fail("systemd filter", unit.string() + " filters @system-service without io_uring",
           "add 'SystemCallFilter=io_uring_setup io_uring_enter io_uring_register' "
           "(systemd 252's @system-service lacks them)");
  else
    r.ok("systemd filter", unit.string() + " allows io_uring");
}

// The drive's free space and its O_DIRECT read rate (drive_probe.h).
void check_drive(Report& r, const DoctorArgs& a, const std::string& dir, Findings& f) {
  const std::string name = "drive " + dir;
  PlanDrive pd{dir, std::nullopt, ""};
  struct statvfs s;
  if (::statvfs(dir.c_str(), &s) != 0) {
    r.fail(name, std::string("cannot stat: ") + std::strerror(errno), "mount the drive first");
    pd.note = "cannot stat";
    f.drives.push_back(pd);
    return;
  }
  const double free = static_cast<double>(s.f_bavail) * s.f_frsize;
  DriveProbeOptions o;
  o.seconds = a.read_seconds;
  o.min_file_bytes = static_cast<uint64_t>(a.test_file_mb) << 20;
  if (f.model) o.span_bytes = std::max<uint64_t>(4096, f.model->expert_bytes);
  auto probe = probe_drive(dir, o);
  if (!probe.ok()) {
    const std::string fs_name = filesystem_name(dir);
    pd.note = std::string(probe.status().message());
    if (probe.status().code() == absl::StatusCode::kFailedPrecondition)
      r.warn(name, gb(free) + " free on " + fs_name + "; " + pd.note + ": no read rate measured",
             fs_name == "tmpfs" || fs_name == "ramfs"
                 ? "this directory is in RAM (" + fs_name +
                       "): put the shards on a drive's filesystem (ext4, xfs) to measure and "
                       "serve them with O_DIRECT"
                 : "put the shards on a filesystem that supports O_DIRECT (ext4, xfs); reads "
                   "will be buffered and use the page cache");
    else
      r.warn(name, gb(free) + " free; " + pd.note + ": no read rate measured",
             "free some space on the drive, or place a shard of at least " +
                 std::to_string(a.test_file_mb) + " MiB there (k3ctl place --apply)");
    f.drives.push_back(pd);
    return;
  }
  const std::string what = probe->temporary
                               ? cat("a ", probe->file_bytes >> 20, " MiB temporary file, removed")
                               : cat(fs::path(probe->file).filename().string(), ", ",
                                     gb(static_cast<double>(probe->file_bytes)));
  char rate[64];
  std::snprintf(rate, sizeof rate, "%.2f GB/s", probe->gbps);
  pd.gbps = probe->gbps;
  pd.note = cat("O_DIRECT, io_uring qd ", probe->queue_depth);
  f.drives.push_back(pd);
  r.ok(name, cat(gb(free), " free; O_DIRECT reads ", rate,
                 " (io_uring, registered buffers, best at", " queue depth ", probe->queue_depth,
                 "; ", a.read_seconds, " s of expert-sized ", "reads of ", what, ")"));
}

void check_files(Report& r, const DoctorArgs& a) {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  size_t shards = 0;
  std::error_code ec;
  for (const std::string& d : a.drives)
    for (const auto& e : fs::directory_iterator(d, ec))
      if (e.path().extension() == ".safetensors") ++shards;
  if (!a.model.empty())
    for (const auto& e : fs::directory_iterator(a.model, ec))
      if (e.path().extension() == ".safetensors") ++shards;
  // Two descriptors per shard (buffered and O_DIRECT) plus sockets and slack.
  const uint64_t need = 2 * shards + 1024;
  const std::string detail = cat("soft limit ", lim.rlim_cur, ", hard ", lim.rlim_max, "; ", shards,
                                 " shard files seen, ", need, " wanted");
  if (lim.rlim_cur < need)
    r.fail("open files", detail, cat("raise it: ulimit -n ", need, " (LimitNOFILE= in the units)"));
  else
    r.ok("open files", detail);
}

void add_doctor_command(CLI::App& app) {
  auto a = std::make_shared<DoctorArgs>();
  auto* cmd = app.add_subcommand(
      "doctor",
      "check this machine for a deployment and print a plan: expertd's cache size, the "
      "drives' measured O_DIRECT rates, the decode s/token they give on the model, what fits "
      "in RAM");
  cmd->add_option("--model", a->model, "model directory: size the dense part (default: none)");
  cmd->add_option("--drive", a->drives, "a drive directory to test (repeatable; default: none)");
  cmd->add_option("--cache-gb", a->cache_gb,
                  "expertd's --cache-gb to fit in the segment dir, GB "
                  "(default 0: not checked)")
      ->check(CLI::Range(0.0, 1e5));
  cmd->add_option("--segment-dir", a->segment_dir,
                  "where expertd's segment lives (default /dev/shm)");
  cmd->add_option("--dense-bits", a->dense_bits, "engined --dense-bits (default 4)")
      ->check(CLI::IsMember({4, 8, 32}));
  cmd->add_option("--mla-bits", a->mla_bits, "engined --mla-bits (default 8)")
      ->check(CLI::IsMember({4, 8, 32}));
  cmd->add_option("--head-bits", a->head_bits, "engined --head-bits (default 8)")
      ->check(CLI::IsMember({4, 8, 32}));
  cmd->add_option("--units-dir", a->units_dir,
                  "where the systemd units are installed (default /etc/systemd/system)");
  cmd->add_option("--cgroup-root", a->cgroup_root,
                  "where the cgroup filesystem is mounted: RAM is this process's cgroup "
                  "memory limit when it has one");
  cmd->add_option("--read-seconds", a->read_seconds, "time spent reading each drive, s (default 3)")
      ->check(CLI::Range(0.05, 600.0));
  cmd->add_option("--test-file-mb", a->test_file_mb,
                  "a drive is read from its largest shard of at least this many MiB, else from a "
                  "temporary file of this size written there and removed (default 256, at least "
                  "256: smaller files measure caches, not the drive)")
      ->check(CLI::Range(256, 1 << 20));
  cmd->add_flag(
      "--json", a->json_out,
      "one JSON object per check, then one per plan line (\"check\": \"plan cache\", "
      "\"plan drives\", \"plan decode\", \"plan ram\", with a \"plan\" object of figures)");
  cmd->callback([a] {
    Report r;
    Findings f;
    check_cpu(r);
    check_memory(r, *a, f);
    check_segment(r, *a, f);
    check_io_uring(r, *a);
    for (const std::string& d : a->drives) check_drive(r, *a, d, f);
    check_files(r, *a);
    PlanInput in;
    in.model = f.model.value_or(PlanModel::kimi_k3());
    in.ram_total = f.ram_total;
    in.ram_available = f.ram_available;
    in.segment_free = f.segment_free;
    in.segment_dir = a->segment_dir;
    in.cache_gb = a->cache_gb;
    in.drives = f.drives;
    r.plan(make_plan(in));
    r.print(a->json_out);
    if (r.failed()) set_exit_code(1);
  });
}

const CommandRegistrar kDoctor(add_doctor_command);

}  // namespace
}  // namespace k3::tools
