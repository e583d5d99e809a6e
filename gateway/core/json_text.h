// JSON text both ways. From a client (a request body, a proto's *_json
// field): parsed with a depth limit, since parsing is iterative but dump,
// comparison and the chat renderer recurse, so a body of a million '[' must be
// refused, not followed. To a client: dumped without throwing.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "shared/status.h"

namespace k3::gateway {

// The deepest JSON nesting a request may have.
inline constexpr int kMaxJsonDepth = 128;

// `text` parsed as JSON (ordered), or InvalidArgument "<what> is not valid
// JSON: ..." ("invalid JSON: ..." when `what` is empty: the request body),
// also for nesting deeper than kMaxJsonDepth.
StatusOr<nlohmann::ordered_json> parse_json_text(std::string_view text, std::string_view what);

// Compact JSON text for a response body (or an SSE event, gateway/http/sse.h).
// Invalid UTF-8 (a model can emit it) is replaced by U+FFFD instead of
// throwing, as nlohmann's dump would.
std::string dump_body(const nlohmann::json& j);

}  // namespace k3::gateway
