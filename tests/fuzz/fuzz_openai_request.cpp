// libFuzzer target: the gateway's OpenAI request parsing on arbitrary bodies
// (the first byte picks /v1/chat/completions or /v1/completions), and an
// accepted chat rendered in K3's XTML format, as the gateway does next.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gateway/http/chat_protocol.h"
#include "gateway/http/completion_protocol.h"
#include "shared/chat/xtml_render.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  if (data[0] & 1) {
    auto call = k3::gateway::parse_completion_request(body);
    if (call.ok() && call->prompt_is_ids && call->prompt_ids.empty()) __builtin_trap();
    return 0;
  }
  auto call = k3::gateway::parse_chat_request(body);
  if (!call.ok()) return 0;
  // Validated: the sampling and stop fields are in range.
  // (Sampling fields are optional since generation_config.json gives the
  // defaults: compare only what the client set.)
  const auto& t = call->sampling.temperature;
  if (call->stop.size() > 4 || (t && (*t < 0 || *t > 2))) __builtin_trap();
  k3::chat::RenderOptions ro;
  ro.developer_as_system = true;
  (void)k3::chat::render_chat(call->render, ro);
  return 0;
}
