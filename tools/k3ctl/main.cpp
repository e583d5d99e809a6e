// k3ctl: the command-line tool of k3serve. main only wires subcommands.
#include <CLI/CLI.hpp>

#include "shared/log.h"
#include "tools/k3ctl/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"k3ctl: tools for k3serve"};
  app.require_subcommand(1);
  std::string level = "info";
  app.add_option("--log-level", level, "trace, debug, info, warn, error");
  k3::k3ctl::add_mkmodel_command(app);
  k3::k3ctl::add_inspect_command(app);
  k3::k3ctl::add_health_command(app);
  CLI11_PARSE(app, argc, argv);
  return k3::k3ctl::exit_code();
}
