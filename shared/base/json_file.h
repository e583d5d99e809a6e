// JSON read from a file we were given: a daemon's config, a topology, a
// checkpoint's metadata, a manifest line. The text must be one valid JSON
// document, and no object may name a key twice: JSON allows it and nlohmann
// keeps the last value, so a file that says two things would silently be read
// as one of them. Refused instead, "LABEL: duplicate key 'NAME'" (any depth).
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "shared/status.h"

namespace k3::base {

// INVALID_ARGUMENT "LABEL: not valid JSON (...)" or "LABEL: duplicate key
// 'NAME' (at PATH)", PATH a JSON pointer to the object ("" for the top).
StatusOr<nlohmann::json> parse_json_file(std::string_view text, std::string_view label);
StatusOr<nlohmann::ordered_json> parse_ordered_json_file(std::string_view text,
                                                         std::string_view label);

}  // namespace k3::base
