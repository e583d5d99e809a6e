// k3ctl: the command-line tool of k3serve. main only wires subcommands.
#include <vector>

#include <CLI/CLI.hpp>

#include "shared/base/cli_help.h"
#include "shared/base/cpu_features.h"
#include "shared/base/log.h"
#include "shared/base/malloc_policy.h"
#include "shared/base/version.h"
#include "tools/k3ctl/commands.h"

namespace k3::tools {
namespace {
std::vector<AddCommandFn>& registry() {
  static std::vector<AddCommandFn> r;
  return r;
}
int g_exit_code = 0;
}  // namespace

CommandRegistrar::CommandRegistrar(AddCommandFn fn) {
  registry().push_back(fn);
}
void add_registered_commands(CLI::App& app) {
  for (AddCommandFn fn : registry()) fn(app);
}
CLI::App* bench_command(CLI::App& app) {
  for (CLI::App* b : app.get_subcommands([](CLI::App* s) { return s->get_name() == "bench"; }))
    return b;
  CLI::App* b = app.add_subcommand("bench", "benchmarks (JSON lines on stdout)");
  b->require_subcommand(1);
  return b;
}
int exit_code() {
  return g_exit_code;
}
void set_exit_code(int code) {
  g_exit_code = code;
}
void fail(const std::string& what) {
  std::fprintf(stderr, "k3ctl: %s\n", what.c_str());
  set_exit_code(1);
}

}  // namespace k3::tools

int main(int argc, char** argv) {
  // An invalid K3_KERNELS (unknown, or a variant this CPU lacks) is refused.
  k3::base::exit_if_kernel_isa_invalid("k3ctl");
  k3::base::keep_freed_memory_for_reuse();  // malloc_policy.h
  CLI::App app{"k3ctl: tools for k3serve"};
  k3::base::use_k3_help_format(app);  // defaults and units on every --help line
  app.set_version_flag("--version", k3::base::version_line("k3ctl"),
                       "print the version and the git commit it was built from, then exit");
  app.require_subcommand(1);
  app.fallthrough();
  std::string level = "info";
  app.add_option("--log-level", level, "trace, debug, info, warn, error")
      ->each([](const std::string& l) { k3::base::set_log_level(l); });
  k3::tools::add_registered_commands(app);
  CLI11_PARSE(app, argc, argv);
  return k3::tools::exit_code();
}
