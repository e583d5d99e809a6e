// JSON text from a client (a request body, a proto's *_json field) parsed
// with a depth limit: parsing is iterative but dump, comparison and the chat
// renderer recurse, so a body of a million '[' must be refused, not followed.
#pragma once

#include <string_view>

#include <nlohmann/json.hpp>

#include "shared/base/status.h"

namespace k3::gateway {

// The deepest JSON nesting a request may have.
inline constexpr int kMaxJsonDepth = 128;

// `text` parsed as JSON (ordered), or InvalidArgument "<what> is not valid
// JSON: ..." ("invalid JSON: ..." when `what` is empty: the request body),
// also for nesting deeper than kMaxJsonDepth.
StatusOr<nlohmann::ordered_json> parse_json_text(std::string_view text, std::string_view what);

}  // namespace k3::gateway
