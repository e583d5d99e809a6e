// libFuzzer target: POST /v1/responses bodies parsed into the chat request
// (gateway/http/responses_protocol.h), and an accepted one rendered in K3's
// XTML format, as the gateway does next.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gateway/http/responses_protocol.h"
#include "shared/chat/xtml_render.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  auto call = k3::gateway::parse_responses_request(body);
  if (!call.ok()) return 0;
  // Accepted: one choice, no stop strings, a non-empty conversation.
  const auto& messages = call->chat.render["messages"];
  if (call->chat.n != 1 || !call->chat.stop.empty() || !messages.is_array() || messages.empty())
    __builtin_trap();
  k3::chat::RenderOptions ro;
  ro.developer_as_system = true;
  (void)k3::chat::render_chat(call->chat.render, ro);
  return 0;
}
