// libFuzzer target: the gateway's Anthropic Messages request parsing on
// arbitrary bodies (the first byte picks /v1/messages or count_tokens), and
// an accepted request's chat call rendered in K3's XTML format, as the
// gateway does next.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "gateway/http/messages_protocol.h"
#include "shared/chat/xtml_render.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view body(reinterpret_cast<const char*>(data) + 1, size - 1);
  const auto endpoint = (data[0] & 1) ? k3::gateway::MessagesEndpoint::kCountTokens
                                      : k3::gateway::MessagesEndpoint::kCreate;
  auto call = k3::gateway::parse_messages_request(body, endpoint);
  if (!call.ok()) return 0;
  // Validated: Anthropic's temperature range, at most 4 stops, max_tokens
  // given for create.
  const auto& t = call->chat.sampling.temperature;
  if (call->chat.stop.size() > 4 || (t && (*t < 0 || *t > 1))) __builtin_trap();
  if (endpoint == k3::gateway::MessagesEndpoint::kCreate && call->chat.max_tokens < 1)
    __builtin_trap();
  (void)k3::chat::render_chat(call->chat.render);
  return 0;
}
