// One named spdlog logger per component ("expertd", "engined", "gateway",
// "k3ctl", "checkpoint", ...), all writing to stderr.
#pragma once

#include <memory>
#include <string>

#include <spdlog/spdlog.h>

#include "absl/strings/string_view.h"

// Lets status messages (absl::string_view in Debian's abseil) go to the logs.
template <>
struct fmt::formatter<absl::string_view> : fmt::formatter<fmt::string_view> {
  template <typename FormatContext>
  auto format(absl::string_view s, FormatContext& ctx) const {
    return fmt::formatter<fmt::string_view>::format(fmt::string_view(s.data(), s.size()), ctx);
  }
};

namespace k3::base {

// Returns (creating on first use) the logger named `component`. Thread-safe.
std::shared_ptr<spdlog::logger> logger(const std::string& component);

// Sets the level of every logger from a name ("debug", "info", "warn", ...);
// returns false for an unknown name.
bool set_log_level(const std::string& level);

}  // namespace k3::base
