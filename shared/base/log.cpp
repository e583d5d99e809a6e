#include "shared/base/log.h"

#include <mutex>

#include <spdlog/sinks/stdout_color_sinks.h>

namespace k3::base {

std::shared_ptr<spdlog::logger> logger(const std::string& component) {
  static std::mutex mu;
  std::lock_guard<std::mutex> lock(mu);
  if (auto l = spdlog::get(component)) return l;
  auto l = spdlog::stderr_color_mt(component);
  l->set_pattern("%Y-%m-%dT%H:%M:%S.%e %^%L%$ [%n] %v");
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

}  // namespace k3::base
