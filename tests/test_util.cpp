#include "tests/test_util.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <thread>

#include "tools/mkmodel/mkmodel.h"

namespace k3::testing {

namespace fs = std::filesystem;

TempDir::TempDir() {
  const char* base = std::getenv("TMPDIR");
  std::string tmpl = std::string(base && *base ? base : "/tmp") + "/k3test-XXXXXX";
  std::vector<char> buf(tmpl.begin(), tmpl.end());
  buf.push_back('\0');
  if (::mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
  path_ = buf.data();
}

TempDir::~TempDir() {
  std::error_code ec;
  fs::remove_all(path_, ec);
}

long minor_faults() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_minflt;
}

std::string bin_dir() {
  return K3_BIN_DIR;
}
std::string source_dir() {
  return K3_SOURCE_DIR;
}

namespace {
std::string slurp_fd(int fd) {
  std::string s;
  char buf[65536];
  ssize_t n;
  while ((n = ::read(fd, buf, sizeof buf)) > 0) s.append(buf, static_cast<size_t>(n));
  return s;
}

std::vector<char*> c_argv(const std::vector<std::string>& argv) {
  std::vector<char*> a;
  for (const auto& s : argv) a.push_back(const_cast<char*>(s.c_str()));
  a.push_back(nullptr);
  return a;
}

int decode_status(int st) {
  if (WIFEXITED(st)) return WEXITSTATUS(st);
  if (WIFSIGNALED(st)) return 128 + WTERMSIG(st);
  return -1;
}
}  // namespace

CommandResult run_command(const std::vector<std::string>& argv, const std::string& stdin_text) {
  // Output goes through temp files: no pipe deadlocks on large outputs.
  TempDir tmp;
  const std::string out_path = tmp.file("out"), err_path = tmp.file("err"),
                    in_path = tmp.file("in");
  write_file(in_path, stdin_text);
  pid_t pid = ::fork();
  if (pid == 0) {
    int in = ::open(in_path.c_str(), O_RDONLY);
    int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
    ::dup2(in, 0);
    ::dup2(out, 1);
    ::dup2(err, 2);
    auto a = c_argv(argv);
    ::execv(a[0], a.data());
    _exit(127);
  }
  int st = 0;
  ::waitpid(pid, &st, 0);
  CommandResult r;
  r.exit_code = decode_status(st);
  r.out = read_file(out_path);
  r.err = read_file(err_path);
  return r;
}

Process::Process(const std::vector<std::string>& argv, const std::string& stderr_file) {
  pid_ = ::fork();
  if (pid_ == 0) {
    if (!stderr_file.empty()) {
      int err = ::open(stderr_file.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
      ::dup2(err, 2);
      ::dup2(err, 1);
    }
    auto a = c_argv(argv);
    ::execv(a[0], a.data());
    _exit(127);
  }
}

Process::~Process() {
  if (pid_ > 0 && status_ < 0) {
    ::kill(pid_, SIGKILL);
    ::waitpid(pid_, nullptr, 0);
  }
}

int Process::wait_exit(double seconds) {
  if (status_ >= 0) return decode_status(status_);
  auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
  // Checked at least once: wait_exit(0) asks whether it has exited.
  for (;;) {
    int st = 0;
    if (::waitpid(pid_, &st, WNOHANG) == pid_) {
      status_ = st;
      return decode_status(st);
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

int Process::stop(int sig) {
  if (status_ >= 0) return decode_status(status_);
  ::kill(pid_, sig);
  int r = wait_exit(20);
  return r;
}

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

void write_file(const std::string& path, const std::string& content) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f << content;
}

uint64_t hash_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  uint64_t h = 0xcbf29ce484222325ull;
  char buf[1 << 16];
  while (f) {
    f.read(buf, sizeof buf);
    for (std::streamsize i = 0; i < f.gcount(); ++i)
      h = (h ^ static_cast<unsigned char>(buf[i])) * 0x100000001b3ull;
  }
  return h;
}

std::vector<std::string> dir_snapshot(const std::string& dir) {
  std::vector<std::string> v;
  for (const auto& e : fs::directory_iterator(dir)) {
    struct stat st;
    ::stat(e.path().c_str(), &st);
    v.push_back(e.path().filename().string() + " " + std::to_string(st.st_size) + " " +
                std::to_string(st.st_mtim.tv_sec) + "." + std::to_string(st.st_mtim.tv_nsec) + " " +
                std::to_string(st.st_mode));
  }
  std::sort(v.begin(), v.end());
  return v;
}

const std::string& tiny_model_dir() {
  static TempDir dir;  // removed at exit
  static const std::string path = [] {
    tools::MkModelOptions opt;
    opt.out_dir = dir.path() + "/tiny";
    opt.seed = 1;
    auto r = tools::make_model(opt);
    if (!r.ok()) throw std::runtime_error(std::string(r.status().message()));
    return opt.out_dir;
  }();
  return path;
}

}  // namespace k3::testing
