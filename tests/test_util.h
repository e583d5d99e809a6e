// Helpers shared by the test suites: temporary directories, running the built
// programs, hashing files, building a tiny model once per suite; EXPECT_CONTAINS.
#pragma once

#include <string>
#include <vector>

// EXPECT that `text` contains `part` (gmock is not linked).
#define EXPECT_CONTAINS(text, part)                                          \
  do {                                                                       \
    const std::string k3_text_ = (text);                                     \
    EXPECT_NE(k3_text_.find(part), std::string::npos) << "in: " << k3_text_; \
  } while (0)

namespace k3::testing {

// A fresh directory under $TMPDIR (or /tmp), removed with its contents on
// destruction.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;
  const std::string& path() const { return path_; }
  std::string file(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

// This process's minor page faults so far (getrusage).
long minor_faults();

// Directory holding the built programs (build/bin).
std::string bin_dir();
// Source tree root.
std::string source_dir();

struct CommandResult {
  int exit_code = -1;  // 128+signal when killed by a signal
  std::string out;     // stdout
  std::string err;     // stderr
};
// Runs argv[0] (a path) with arguments, waits, captures output. `stdin_text`
// is written to its standard input.
CommandResult run_command(const std::vector<std::string>& argv, const std::string& stdin_text = "");

// A started child process; killed (SIGKILL) on destruction if still running.
class Process {
 public:
  explicit Process(const std::vector<std::string>& argv, const std::string& stderr_file = "");
  ~Process();
  int pid() const { return pid_; }
  // Sends `sig` and waits for exit; returns the exit code (128+signal if killed).
  int stop(int sig);
  // Waits for the process to exit within `seconds`; nullopt-like -1 on timeout.
  int wait_exit(double seconds);

 private:
  int pid_ = -1;
  int status_ = -1;
};

std::string read_file(const std::string& path);
void write_file(const std::string& path, const std::string& content);
// FNV-1a 64 of a file's bytes.
uint64_t hash_file(const std::string& path);
// Sorted "name size mtime_ns" lines of a directory (to prove it was not modified).
std::vector<std::string> dir_snapshot(const std::string& dir);

// A tiny model written once per process into a temp dir (k3ctl mkmodel's
// library entry point, preset tiny, seed 1, 3 shards).
const std::string& tiny_model_dir();

}  // namespace k3::testing
