// libFuzzer target: the daemons' config files (--config FILE): the JSON
// object expanded into flags (shared/base/config_file.h), then parsed and
// validated by expertd's or the gateway's real config struct (the first byte
// picks which). Bad files are refused with the file named, never a crash.
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <fstream>
#include <string>

#include <CLI/CLI.hpp>

#include "expertd/config.h"
#include "gateway/core/config.h"
#include "shared/base/config_file.h"

namespace {

const std::string& config_path() {
  static const std::string p = "/tmp/k3fuzz-daemon-config-" + std::to_string(::getpid()) + ".json";
  return p;
}

template <typename Config>
void run(const std::string& daemon, const std::vector<std::string>& switches) {
  CLI::App app{daemon};
  Config cfg;
  cfg.add_flags(app);
  std::vector<std::string> args = {daemon, "--config", config_path(), "--model", "/nonexistent"};
  auto expanded = k3::base::expand_config_file(args, 1, switches, [&](const std::string& name) {
    return app.get_option_no_throw("--" + name) != nullptr;
  });
  if (!expanded.ok()) {
    if (expanded.status().message().find(config_path()) == std::string_view::npos)
      __builtin_trap();  // an error names the file
    return;
  }
  for (const std::string& a : *expanded)
    if (a == "--config") __builtin_trap();  // replaced by the file's flags
  auto argv = k3::base::to_argv(*expanded);
  try {
    app.parse(static_cast<int>(expanded->size()), argv.data());
  } catch (const CLI::ParseError&) {
    return;
  }
  (void)cfg.validate();
  (void)cfg.summary();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  {
    std::ofstream f(config_path(), std::ios::binary | std::ios::trunc);
    f.write(reinterpret_cast<const char*>(data) + 1, static_cast<std::streamsize>(size - 1));
  }
  if (data[0] % 2 == 0)
    run<k3::expertd::Config>("expertd", {"no-direct"});
  else
    run<k3::gateway::GatewayConfig>("gateway", {});  // as gateway/main.cpp
  return 0;
}
