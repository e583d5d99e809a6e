#include "shared/base/log.h"
#include "shared/base/log_format.h"

#include <time.h>

#include <cstdio>
#include <mutex>

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_color_sinks.h>
#include <nlohmann/json.hpp>

namespace k3::base {
namespace {

// Text lines: the time with its UTC offset (%z: "+00:00"), level letter,
// component.
constexpr const char* kTextPattern = "%Y-%m-%dT%H:%M:%S.%e%z %^%L%$ [%n] %v";

// The JSON format: one object per message.
class JsonFormatter : public spdlog::formatter {
 public:
  explicit JsonFormatter(std::string daemon) : daemon_(std::move(daemon)) {}
  void format(const spdlog::details::log_msg& m, spdlog::memory_buf_t& dest) override {
    const std::string line = json_log_line(
        m.time, m.level, daemon_, std::string_view(m.logger_name.data(), m.logger_name.size()),
        std::string_view(m.payload.data(), m.payload.size()));
    dest.append(line.data(), line.data() + line.size());
    dest.push_back('\n');
  }
  std::unique_ptr<spdlog::formatter> clone() const override {
    return std::make_unique<JsonFormatter>(daemon_);
  }

 private:
  const std::string daemon_;
};

struct LogState {
  std::mutex mu;
  LogFormat format = LogFormat::kText;
  std::string daemon;
};

LogState& state() {
  static LogState s;
  return s;
}

// Under state().mu.
void apply_format(spdlog::logger& l, const LogState& s) {
  if (s.format == LogFormat::kJson)
    l.set_formatter(std::make_unique<JsonFormatter>(s.daemon.empty() ? l.name() : s.daemon));
  else
    l.set_pattern(kTextPattern);
}

// "[ID] rest" -> ID (no space or bracket inside, at most 128 bytes); "" if none.
std::string_view leading_request_id(std::string_view message) {
  if (message.size() < 4 || message[0] != '[') return {};
  const size_t close = message.find("] ");
  if (close == std::string_view::npos || close < 2 || close > 129) return {};
  const std::string_view id = message.substr(1, close - 1);
  if (id.find_first_of(" []\t\n") != std::string_view::npos) return {};
  return id;
}

}  // namespace

std::shared_ptr<spdlog::logger> logger(const std::string& component) {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  if (auto l = spdlog::get(component)) return l;
  auto l = spdlog::stderr_color_mt(component);
  apply_format(*l, s);
  l->set_level(spdlog::get_level());
  return l;
}

bool set_log_level(const std::string& level) {
  auto lvl = spdlog::level::from_str(level);
  if (lvl == spdlog::level::off && level != "off") return false;
  spdlog::set_level(lvl);
  spdlog::apply_all([lvl](std::shared_ptr<spdlog::logger> l) { l->set_level(lvl); });
  return true;
}

std::optional<LogFormat> parse_log_format(std::string_view name) {
  if (name == "text") return LogFormat::kText;
  if (name == "json") return LogFormat::kJson;
  return std::nullopt;
}

void set_log_format(LogFormat format, const std::string& daemon) {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  s.format = format;
  s.daemon = daemon;
  spdlog::apply_all([&s](std::shared_ptr<spdlog::logger> l) { apply_format(*l, s); });
}

bool log_format_is_json() {
  LogState& s = state();
  std::lock_guard<std::mutex> lock(s.mu);
  return s.format == LogFormat::kJson;
}

std::string as_log_line(std::string_view component, std::string_view text) {
  LogState& s = state();
  std::unique_lock<std::mutex> lock(s.mu);
  if (s.format != LogFormat::kJson) return std::string(text);
  const std::string daemon = s.daemon.empty() ? std::string(component) : s.daemon;
  lock.unlock();
  return json_log_line(std::chrono::system_clock::now(), spdlog::level::info, daemon, component,
                       text);
}

std::string rfc3339_local(std::chrono::system_clock::time_point time) {
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(time.time_since_epoch());
  const time_t secs = static_cast<time_t>(std::chrono::floor<std::chrono::seconds>(ms).count());
  const int millis = static_cast<int>(ms.count() - static_cast<int64_t>(secs) * 1000);
  struct tm tm {};
  localtime_r(&secs, &tm);
  const long off = tm.tm_gmtoff / 60;  // minutes east of UTC
  const long aoff = off < 0 ? -off : off;
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%03d%c%02ld:%02ld",
                tm.tm_year + 1900, tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                millis, off < 0 ? '-' : '+', aoff / 60, aoff % 60);
  return buf;
}

std::string json_log_line(std::chrono::system_clock::time_point time,
                          spdlog::level::level_enum level, std::string_view daemon,
                          std::string_view component, std::string_view message) {
  nlohmann::ordered_json j;
  j["time"] = rfc3339_local(time);
  const auto lvl = spdlog::level::to_string_view(level);
  j["level"] = std::string(lvl.data(), lvl.size());
  j["daemon"] = std::string(daemon);
  if (!component.empty() && component != daemon) j["component"] = std::string(component);
  const std::string_view id = leading_request_id(message);
  if (!id.empty()) {
    j["message"] = std::string(message.substr(id.size() + 3));
    j["request_id"] = std::string(id);
  } else {
    j["message"] = std::string(message);
  }
  // Bytes that are not UTF-8 (a path, a client's text) become U+FFFD rather
  // than an exception: a log line is always written.
  return j.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
}

}  // namespace k3::base
