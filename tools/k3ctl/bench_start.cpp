// k3ctl bench start: how long `engined serve` takes to be ready (its gRPC
// Health answers SERVING) and how much memory it holds, from the source at 4
// and 8 bits, from a container (k3ctl repack, 4 bits) and from the container
// with --mmap; cold page cache (caches dropped before each run, when root) and
// warm. JSON lines on stdout: one per run, then the container's size against
// the source and the ratios of the times to ready.
#include <fcntl.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "k3serve/v1/engine.grpc.pb.h"
#include "shared/base/file.h"
#include "shared/base/scratch_dir.h"
#include "shared/base/subprocess.h"
#include "shared/checkpoint/repack.h"
#include "tools/k3ctl/commands.h"

namespace k3::tools {
namespace {

namespace fs = std::filesystem;
using Clock = std::chrono::steady_clock;

void emit(const nlohmann::json& j) {
  std::printf("%s\n", j.dump().c_str());
  std::fflush(stdout);
}

struct Memory {
  int64_t rss_anon_kb = 0, rss_file_kb = 0, hwm_kb = 0;
};

// RssAnon, RssFile and VmHWM of /proc/PID/status.
Memory read_memory(pid_t pid) {
  Memory m;
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  auto field = [&](const char* name, int64_t* out) {
    const size_t n = std::strlen(name);
    if (line.compare(0, n, name) == 0) *out = std::atoll(line.c_str() + n);
  };
  while (std::getline(f, line)) {
    field("RssAnon:", &m.rss_anon_kb);
    field("RssFile:", &m.rss_file_kb);
    field("VmHWM:", &m.hwm_kb);
  }
  return m;
}

bool serving(const std::string& address) {
  auto channel = grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(200));
  k3serve::v1::HealthRequest req;
  k3serve::v1::HealthResponse resp;
  return k3serve::v1::EngineService::NewStub(channel)->Health(&ctx, req, &resp).ok() &&
         resp.status() == k3serve::v1::HealthResponse::SERVING;
}

Status drop_caches() {
  ::sync();
  std::ofstream f("/proc/sys/vm/drop_caches");
  f << "1\n";
  f.close();
  if (!f) return absl::PermissionDeniedError("cannot write /proc/sys/vm/drop_caches");
  return absl::OkStatus();
}

struct Run {
  double ready_s = 0;
  Memory peak;  // largest RssAnon and RssFile seen while starting, VmHWM at ready
};

// Starts engined serve with `args`, waits until it serves, stops it.
StatusOr<Run> start_once(const std::string& engined, const std::vector<std::string>& args,
                         const std::string& work, double timeout_s) {
  const std::string sock = work + "/engined.sock", log = work + "/engined.log";
  std::vector<std::string> argv = {
      engined, "serve", "--listen", "unix:" + sock, "--expert-cache-gb", "0.05"};
  argv.insert(argv.end(), args.begin(), args.end());
  const auto t0 = Clock::now();
  const pid_t pid = ::fork();
  if (pid < 0) return absl::InternalError("fork failed");
  if (pid == 0) {
    const int fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (fd >= 0) {
      ::dup2(fd, 1);
      ::dup2(fd, 2);
    }
    std::vector<char*> cargv;
    for (auto& a : argv) cargv.push_back(a.data());
    cargv.push_back(nullptr);
    ::execv(engined.c_str(), cargv.data());
    ::_exit(127);
  }
  Run r;
  Status result = absl::OkStatus();
  for (;;) {
    const Memory m = read_memory(pid);
    r.peak.rss_anon_kb = std::max(r.peak.rss_anon_kb, m.rss_anon_kb);
    r.peak.rss_file_kb = std::max(r.peak.rss_file_kb, m.rss_file_kb);
    if (serving("unix:" + sock)) {
      r.ready_s = std::chrono::duration<double>(Clock::now() - t0).count();
      r.peak.hwm_kb = read_memory(pid).hwm_kb;
      break;
    }
    int status = 0;
    if (::waitpid(pid, &status, WNOHANG) == pid) {
      auto text = base::read_small_file(log, 1 << 20);
      return absl::InternalError(
          cat("engined exited before serving: ",
              text.ok() ? text->substr(text->size() > 2000 ? text->size() - 2000 : 0) : ""));
    }
    if (std::chrono::duration<double>(Clock::now() - t0).count() > timeout_s) {
      result = absl::DeadlineExceededError(cat("engined not serving after ", timeout_s, " s"));
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ::kill(pid, SIGTERM);
  int status = 0;
  ::waitpid(pid, &status, 0);
  if (!result.ok()) return result;
  return r;
}

uint64_t dir_bytes(const std::string& dir) {
  uint64_t n = 0;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) n += e.file_size();
  return n;
}

struct StartOptions {
  std::string model;
  std::string container;  // "" = repack into a temporary directory
  double timeout_s = 600;
};

// Removes the bench's temporary directory however the run ends.

void run_bench(const StartOptions& o) {
  const std::string engined = base::self_exe_dir() + "/engined";
  auto scratch = base::ScratchDir::create("k3bench-start");
  if (!scratch.ok()) return fail(msg(scratch.status()));
  const std::string work = (*scratch)->path();
  std::string container = o.container;
  if (container.empty()) {
    container = work + "/container";
    checkpoint::RepackOptions ro;
    ro.model_dir = o.model;
    ro.out_dir = container;
    const auto t0 = Clock::now();
    auto r = checkpoint::repack(ro);
    if (!r.ok()) return fail(msg(r.status()));
    emit({{"bench", "start"},
          {"repack_seconds", std::chrono::duration<double>(Clock::now() - t0).count()}});
  }
  const bool root = ::geteuid() == 0;
  if (!root)
    emit({{"bench", "start"},
          {"cache", "cold"},
          {"skipped", "not root: cannot drop the page cache; warm page cache only"}});
  struct Config {
    const char* name;
    std::string model;
    std::vector<std::string> args;
  };
  const std::vector<Config> configs = {
      {"source_4bit", o.model, {"--dense-bits", "4"}},
      {"source_8bit", o.model, {"--dense-bits", "8"}},
      {"container", container, {}},
      {"container_mmap", container, {"--mmap"}},
  };
  std::map<std::string, double> ready;  // "config/cache" -> seconds
  for (const char* cache : {"cold", "warm"}) {
    if (std::string(cache) == "cold" && !root) continue;
    for (const Config& c : configs) {
      std::vector<std::string> args = {"--model", c.model};
      args.insert(args.end(), c.args.begin(), c.args.end());
      if (std::string(cache) == "cold") {
        if (Status s = drop_caches(); !s.ok()) return fail(msg(s));
      } else {
        // Warm: one start first fills the page cache.
        if (auto w = start_once(engined, args, work, o.timeout_s); !w.ok())
          return fail(cat(c.name, ": ", msg(w.status())));
      }
      auto r = start_once(engined, args, work, o.timeout_s);
      if (!r.ok()) return fail(cat(c.name, ": ", msg(r.status())));
      ready[cat(c.name, "/", cache)] = r->ready_s;
      emit({{"bench", "start"},
            {"config", c.name},
            {"cache", cache},
            {"ready_seconds", r->ready_s},
            {"peak_rss_anon_mb", r->peak.rss_anon_kb / 1024.0},
            {"peak_rss_file_mb", r->peak.rss_file_kb / 1024.0},
            {"vm_hwm_mb", r->peak.hwm_kb / 1024.0}});
    }
  }
  const double src = static_cast<double>(dir_bytes(o.model));
  const double cont = static_cast<double>(dir_bytes(container));
  nlohmann::json sum = {{"bench", "start"},
                        {"source_bytes", src},
                        {"container_bytes", cont},
                        {"container_vs_source", cont / src}};
  for (const char* cache : {"cold", "warm"}) {
    const std::string s = cat("source_4bit/", cache);
    if (!ready.count(s)) continue;
    sum[cat("ready_container_vs_source_", cache)] = ready[cat("container/", cache)] / ready[s];
    sum[cat("ready_mmap_vs_source_", cache)] = ready[cat("container_mmap/", cache)] / ready[s];
  }
  emit(sum);
}

void add_bench_start_command(CLI::App& app) {
  auto o = std::make_shared<StartOptions>();
  auto* cmd = bench_command(app)->add_subcommand(
      "start", "time to ready and peak RSS of engined serve: source, container, --mmap");
  cmd->add_option("--model", o->model, "source checkpoint directory")->required();
  cmd->add_option("--container", o->container,
                  "a container of it at 4 bits (default: repacked into a temporary directory)");
  cmd->add_option("--timeout", o->timeout_s, "seconds one start may take")
      ->check(CLI::Range(1.0, 86400.0));
  cmd->callback([o] { run_bench(*o); });
}

const CommandRegistrar kBenchStart(add_bench_start_command);

}  // namespace
}  // namespace k3::tools
