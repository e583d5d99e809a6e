#include "gateway/core/json_text.h"

namespace k3::gateway {
namespace {

using nlohmann::ordered_json;

Status bad(std::string message) {
  return absl::InvalidArgumentError(std::move(message));
}

// nlohmann's messages start with "[json.exception.parse_error.101] ", which
// says nothing to a client.
std::string strip_exception_tag(std::string_view what) {
  if (what.starts_with("[json.exception.")) {
    const size_t end = what.find("] ");
    if (end != std::string_view::npos) what.remove_prefix(end + 2);
  }
  return std::string(what);
}

// "invalid JSON: " for the request body (what = ""), else "<what> is not
// valid JSON: ".
std::string invalid_json_prefix(std::string_view what) {
  return what.empty() ? std::string("invalid JSON: ") : cat(what, " is not valid JSON: ");
}

// Refuses nesting deeper than kMaxJsonDepth before nlohmann sees the text:
// parsing is iterative but dump, comparison and the renderer recurse.
Status check_depth(std::string_view text, std::string_view what) {
  int depth = 0;
  bool in_string = false;
  bool escaped = false;
  for (const char c : text) {
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
      continue;
    }
    if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) {
        return bad(cat(invalid_json_prefix(what), "nested deeper than ", kMaxJsonDepth, " levels"));
      }
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return absl::OkStatus();
}

}  // namespace

StatusOr<ordered_json> parse_json_text(std::string_view text, std::string_view what) {
  K3_RETURN_IF_ERROR(check_depth(text, what));
  try {
    return ordered_json::parse(text.begin(), text.end());
  } catch (const nlohmann::json::exception& e) {
    return bad(cat(invalid_json_prefix(what), strip_exception_tag(e.what())));
  }
}

std::string dump_body(const nlohmann::json& j) {
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

}  // namespace k3::gateway
