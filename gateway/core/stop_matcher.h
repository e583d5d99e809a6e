// Stop strings over streamed text: text is released as soon as it can no
// longer be the start of a stop string, and generation ends before the first
// occurrence (which is not returned, as OpenAI does).
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace k3::gateway {

// Not thread-safe: one per generation.
class StopMatcher {
 public:
  explicit StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  // Appends `text` and returns what may be shown now; `*stopped` turns true
  // at the first stop string (later input is ignored).
  std::string feed(std::string_view text, bool* stopped);
  // End of stream: the held-back tail.
  std::string flush();
  // The stop string that ended the text ("" before one did); the first in
  // the list among those found at the same place.
  const std::string& matched() const { return matched_; }

 private:
  std::vector<std::string> stops_;
  std::string held_;
  bool stopped_ = false;
  std::string matched_;
};

}  // namespace k3::gateway
