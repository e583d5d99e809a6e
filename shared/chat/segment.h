// XTML segments: a prompt is a list of text pieces, each encoded on its own
// (BPE never crosses a segment boundary); markup segments are control tokens,
// the only place special tokens are recognised (K3_MODEL.md, "Chat format").
#pragma once

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace k3::chat {

// The four XTML control tokens.
inline constexpr std::string_view kOpenToken = "<|open|>";
inline constexpr std::string_view kCloseToken = "<|close|>";
inline constexpr std::string_view kSepToken = "<|sep|>";
inline constexpr std::string_view kEndOfMsgToken = "<|end_of_msg|>";

struct Segment {
  std::string text;
  bool markup = false;  // a control token (special tokens recognised)
  bool operator==(const Segment&) const = default;
};
using Segments = std::vector<Segment>;

// Attribute value escaping: `&` -> `&amp;`, then `"` -> `&quot;` (nothing else).
std::string escape_attribute(std::string_view value);
// The inverse (left to right; any other `&` sequence stays as it is).
std::string unescape_attribute(std::string_view value);

// Appends segments by the XTML rules. Not thread-safe.
class SegmentWriter {
 public:
  using Attributes = std::initializer_list<std::pair<std::string_view, std::string_view>>;

  // A text segment; an empty text produces none.
  void text(std::string_view text);
  // A markup segment holding one control token.
  void markup(std::string_view token);
  // <|open|> tag, then per attribute ` key`, `="`, escaped value, `"`, then <|sep|>.
  void open(std::string_view tag, Attributes attributes = {});
  void open(std::string_view tag,
            const std::vector<std::pair<std::string_view, std::string>>& attributes);
  // <|close|> tag <|sep|>.
  void close(std::string_view tag);
  void end_of_msg() { markup(kEndOfMsgToken); }

  const Segments& segments() const { return segments_; }
  Segments take() { return std::move(segments_); }

 private:
  void attribute(std::string_view key, std::string_view value);
  Segments segments_;
};

// The segments concatenated, for logs and debugging (control tokens inline).
std::string join_segments(const Segments& segments);

}  // namespace k3::chat
