// The format of every daemon's log lines (--log-format), over the loggers of
// shared/base/log.h:
//   text  2026-12-03T16:10:53.123+00:00 I [gateway] listening http=...
//   json  {"time":"2026-12-03T16:10:53.123+00:00","level":"info","daemon":"gateway",
//          "message":"done: ...","request_id":"chatcmpl-..."}
// one object per line. A line about one request starts with "[ID] " (the
// house convention); the JSON format moves that ID to "request_id". A
// component other than the daemon itself ("checkpoint") is "component".
// (Apart from log.h so that the many files logging do not depend on it.)
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include <spdlog/common.h>

namespace k3::base {

enum class LogFormat { kText, kJson };

// "text" or "json"; nullopt for anything else.
std::optional<LogFormat> parse_log_format(std::string_view name);

// The format of every logger, existing and future; `daemon` is the program
// named in JSON lines. Call early in main (before threads log).
void set_log_format(LogFormat format, const std::string& daemon);

// The JSON line (without its newline) for one message: what the json format
// writes. `time` is shown in the local time zone with its UTC offset.
std::string json_log_line(std::chrono::system_clock::time_point time,
                          spdlog::level::level_enum level, std::string_view daemon,
                          std::string_view component, std::string_view message);

// Whether the json format is chosen (then nothing draws on the terminal).
bool log_format_is_json();
// A line written to stderr outside the loggers (Progress): `text` itself in
// the text format, a JSON line (level info, `component`) in the json format.
std::string as_log_line(std::string_view component, std::string_view text);

// RFC 3339 with milliseconds and the local UTC offset: "2026-12-03T17:10:53.123+01:00".
std::string rfc3339_local(std::chrono::system_clock::time_point time);

}  // namespace k3::base
