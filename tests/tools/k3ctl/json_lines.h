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

}  // namespace k3::testing
