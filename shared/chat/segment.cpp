#include "shared/chat/segment.h"

namespace k3::chat {

std::string escape_attribute(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '&') {
      out += "&amp;";
    } else if (c == '"') {
      out += "&quot;";
    } else {
      out += c;
    }
  }
  return out;
}

std::string unescape_attribute(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  size_t i = 0;
  while (i < value.size()) {
    if (value.substr(i).starts_with("&amp;")) {
      out += '&';
      i += 5;
    } else if (value.substr(i).starts_with("&quot;")) {
      out += '"';
      i += 6;
    } else {
      out += value[i++];
    }
  }
  return out;
}

void SegmentWriter::text(std::string_view text) {
  if (!text.empty()) segments_.push_back({std::string(text), false});
}

void SegmentWriter::markup(std::string_view token) {
  segments_.push_back({std::string(token), true});
}

void SegmentWriter::attribute(std::string_view key, std::string_view value) {
  std::string spaced_key = " ";
  spaced_key += key;
  text(spaced_key);
  text("=\"");
  text(escape_attribute(value));
  text("\"");
}

void SegmentWriter::open(std::string_view tag, Attributes attributes) {
  markup(kOpenToken);
  text(tag);
  for (const auto& [key, value] : attributes) attribute(key, value);
  markup(kSepToken);
}

void SegmentWriter::open(std::string_view tag,
                         const std::vector<std::pair<std::string_view, std::string>>& attributes) {
  markup(kOpenToken);
  text(tag);
  for (const auto& [key, value] : attributes) attribute(key, value);
  markup(kSepToken);
}

void SegmentWriter::close(std::string_view tag) {
  markup(kCloseToken);
  text(tag);
  markup(kSepToken);
}

std::string join_segments(const Segments& segments) {
  std::string out;
  for (const Segment& s : segments) out += s.text;
  return out;
}

}  // namespace k3::chat
