// k3ctl's subcommands. Each k3ctl/*.cpp registers the subcommands it defines
// with a static CommandRegistrar; main() adds every registered one.
#pragma once

#include <string>

#include <CLI/CLI.hpp>

namespace k3::tools {

using AddCommandFn = void (*)(CLI::App& app);

// Registers `fn` to be called by main() with the root CLI::App.
struct CommandRegistrar {
  explicit CommandRegistrar(AddCommandFn fn);
};
void add_registered_commands(CLI::App& app);

// The "bench" subcommand (created on first call); benchmarks add theirs to it.
CLI::App* bench_command(CLI::App& app);

// The exit code of the subcommand that ran (0 when none failed).
int exit_code();
void set_exit_code(int code);
// Prints "k3ctl: <what>" to stderr and sets the exit code to 1.
void fail(const std::string& what);

}  // namespace k3::tools
