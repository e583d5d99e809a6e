// Renders an OpenAI-style chat request into XTML segments (K3_MODEL.md,
// "Chat format (XTML)"; the synthesized texts in chat_strings.h). K3 has no
// Jinja template: this function is the prompt format.
//
// Request fields read: messages, tools, tool_choice, response_format,
// `thinking` (true/false, default true), `thinking_effort` (low, high, max),
// `add_generation_prompt` (default true). A JSON null counts as absent. The
// request is an ordered_json because argument objects keep their key order.
#pragma once

#include <nlohmann/json.hpp>

#include "shared/base/status.h"
#include "shared/chat/segment.h"

namespace k3::chat {

struct RenderOptions {
  // OpenAI's `developer` role as `system` (the gateway's mapping; off, the
  // role is refused like any other unknown one).
  bool developer_as_system = false;
};

// The segments of the prompt, or InvalidArgument naming the field (e.g.
// "messages[2].tool_calls[0]: ...") for a request the format refuses.
StatusOr<Segments> render_chat(const nlohmann::ordered_json& request,
                               const RenderOptions& options = {});

// Whether the request asks for the think channel (`thinking`, default true):
// the output parser starts in the channel the generation prompt opened.
StatusOr<bool> thinking_enabled(const nlohmann::ordered_json& request);

}  // namespace k3::chat
