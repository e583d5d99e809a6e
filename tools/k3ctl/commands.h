// k3ctl's subcommands. Each add_*_command registers a CLI11 subcommand whose
// callback runs it and records the process exit code.
#pragma once

#include <CLI/CLI.hpp>

namespace k3::k3ctl {

void add_mkmodel_command(CLI::App& app);
void add_inspect_command(CLI::App& app);
void add_health_command(CLI::App& app);

// The exit code of the subcommand that ran (0 when none failed).
int exit_code();
void set_exit_code(int code);

}  // namespace k3::k3ctl
