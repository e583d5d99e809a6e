// The `--help` convention of every k3serve program: each option line ends
// with what it is when not given, in one of these forms
//   (default: VALUE)   the value used when the option is absent; VALUE may be
//                      words ("(default: the directory's name)") or "unset"
//   (required)         must be given
//   (flag)             takes no value; absent means off
// and a numeric option says its unit in its name or description ("seconds",
// "-gb", "tokens", ...). tests/tools/help_test.py walks every program's help
// and fails on a line that breaks this.
#pragma once

#include <CLI/CLI.hpp>

namespace k3::base {

// Installs the formatter that writes the markers above (from the option's
// required / flag state and its captured default; a description that already
// says "(default" is left as it is), and makes options added to `app` (and to
// subcommands added later) capture their variable's initial value as the
// default. Call right after constructing the root CLI::App.
void use_k3_help_format(CLI::App& app);

}  // namespace k3::base
