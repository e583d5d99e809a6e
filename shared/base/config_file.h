// Daemon config files: `--config FILE` names a JSON object whose keys are the
// long flag names (`cache-gb` or `cache_gb`) and whose values are what the
// flag takes (a string, number or bool; an array for a repeatable flag). The
// file's settings become flags placed before the command line's own, so a
// flag given on the command line overrides the file. One format for the three
// daemons, parsed by the same strict JSON parser as everything else.
#pragma once

#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "shared/status.h"

namespace k3::base {

// The command line with `--config FILE` (or `--config=FILE`) replaced by the
// file's flags, inserted at `insert_at` (1, or 2 after a subcommand).
// `flag_switches` are the flags that take no value (true adds the flag,
// false leaves it out). Errors name the file and the key.
// `known` says whether a flag name (without dashes) exists.
StatusOr<std::vector<std::string>> expand_config_file(
    const std::vector<std::string>& args, size_t insert_at,
    const std::vector<std::string>& flag_switches,
    const std::function<bool(const std::string&)>& known);

// argv for CLI11 from strings (pointers into `args`, which must outlive it).
std::vector<char*> to_argv(std::vector<std::string>& args);

}  // namespace k3::base

// In main(): parses argc/argv into `app` with the config file expanded first;
// returns from main with 2 (and the reason on stderr) on a bad config file.
// `flags_app` is the CLI::App (or subcommand) whose flags the file may set.
#define K3_PARSE_WITH_CONFIG(app, argc, argv, insert_at, switches, flags_app)           \
  std::vector<std::string> k3_args_(argv, argv + argc);                                 \
  auto k3_expanded_ = ::k3::base::expand_config_file(                                   \
      k3_args_, (insert_at), (switches), [&](const std::string& k3_name_) {             \
        return (flags_app).get_option_no_throw("--" + k3_name_) != nullptr ||           \
               (app).get_option_no_throw("--" + k3_name_) != nullptr;                   \
      });                                                                               \
  if (!k3_expanded_.ok()) {                                                             \
    std::fprintf(stderr, "%s\n", std::string(k3_expanded_.status().message()).c_str()); \
    return 2;                                                                           \
  }                                                                                     \
  auto k3_argv_ = ::k3::base::to_argv(*k3_expanded_);                                   \
  CLI11_PARSE(app, static_cast<int>(k3_expanded_->size()), k3_argv_.data())

namespace k3::base {}  // namespace k3::base
