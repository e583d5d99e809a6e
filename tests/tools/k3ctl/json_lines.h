// The JSON lines a k3ctl bench prints, parsed for its tests.
#pragma once

#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include <vector>

namespace k3::testing {

// One value per non-empty line; throws (failing the test) on a bad line.
inline std::vector<nlohmann::json> json_lines(const std::string& out) {
  std::vector<nlohmann::json> v;
  std::stringstream ss(out);
  std::string line;
  while (std::getline(ss, line))
    if (!line.empty()) v.push_back(nlohmann::json::parse(line));
  return v;
}

// The lines of `v` whose "metric" is `metric`, in order.
inline std::vector<nlohmann::json> with_metric(const std::vector<nlohmann::json>& v,
                                               const std::string& metric) {
  std::vector<nlohmann::json> out;
  for (const nlohmann::json& j : v)
    if (j.at("metric") == metric) out.push_back(j);
  return out;
}

}  // namespace k3::testing
