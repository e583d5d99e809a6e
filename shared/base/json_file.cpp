#include "shared/base/json_file.h"

#include <set>
#include <string>
#include <vector>

namespace k3::base {

namespace {

// JSON pointer escaping of one reference token (RFC 6901).
std::string pointer_token(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~')
      out += "~0";
    else if (c == '/')
      out += "~1";
    else
      out += c;
  }
  return out;
}

template <typename Json>
StatusOr<Json> parse_strict(std::string_view text, std::string_view label) {
  // One frame per open object or array: the keys an object named so far,
  // and the pointer to it; an array's elements are numbered.
  struct Frame {
    bool object = true;
    std::set<std::string> keys;
    std::string path;
    size_t next_index = 0;
    std::string last_key;
  };
  std::vector<Frame> open;
  std::string duplicate, duplicate_at;
  // The pointer to a value about to start inside the innermost frame.
  const auto child_path = [&]() -> std::string {
    if (open.empty()) return "";
    Frame& f = open.back();
    if (f.object) return f.path + "/" + pointer_token(f.last_key);
    return f.path + "/" + std::to_string(f.next_index++);
  };
  auto callback = [&](int, typename Json::parse_event_t event, Json& parsed) {
    using E = typename Json::parse_event_t;
    switch (event) {
      case E::object_start:
      case E::array_start: {
        std::string path = child_path();
        open.push_back({event == E::object_start, {}, std::move(path), 0, {}});
        break;
      }
      case E::object_end:
      case E::array_end:
        if (!open.empty()) open.pop_back();
        break;
      case E::key: {
        Frame& f = open.back();
        f.last_key = parsed.template get_ref<const std::string&>();
        if (!f.keys.insert(f.last_key).second && duplicate.empty()) {
          duplicate = f.last_key;
          duplicate_at = f.path;
        }
        break;
      }
      case E::value:
        // A scalar element of an array takes its index.
        if (!open.empty() && !open.back().object) ++open.back().next_index;
        break;
    }
    return true;
  };
  Json j;
  try {
    j = Json::parse(text.begin(), text.end(), callback, /*allow_exceptions=*/true);
  } catch (const typename Json::exception& e) {
    return absl::InvalidArgumentError(cat(label, ": not valid JSON (", e.what(), ")"));
  }
  if (!duplicate.empty())
    return absl::InvalidArgumentError(
        cat(label, ": duplicate key '", duplicate, "'",
            duplicate_at.empty() ? std::string() : cat(" (at ", duplicate_at, ")")));
  return j;
}

}  // namespace

StatusOr<nlohmann::json> parse_json_file(std::string_view text, std::string_view label) {
  return parse_strict<nlohmann::json>(text, label);
}

StatusOr<nlohmann::ordered_json> parse_ordered_json_file(std::string_view text,
                                                         std::string_view label) {
  return parse_strict<nlohmann::ordered_json>(text, label);
}

}  // namespace k3::base
