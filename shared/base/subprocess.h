// Runs a program (no shell: argv as given) and collects its output, for tools
// that drive our own binaries (k3ctl eval runs engined once per setting).
#pragma once

#include <string>
#include <vector>

#include "shared/status.h"

namespace k3::base {

struct ProcessResult {
  int exit_code = -1;  // 128 + signal when killed by a signal
  std::string out;     // stdout
  std::string err;     // stderr
};

// argv[0] is a path. Fails only when the program cannot be started.
StatusOr<ProcessResult> run_process(const std::vector<std::string>& argv);

// The directory of the running executable (/proc/self/exe).
std::string self_exe_dir();

}  // namespace k3::base
