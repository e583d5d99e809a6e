// Renders an OpenAI-style chat request into XTML segments exactly as Moonshot's
// reference encoder (`encoding_k3.py`, build_chat_segments) does; every rule
// is listed, with the test case proving it, in docs/chat-format.md. K3 has no
// Jinja template: this function is the prompt format.
//
// Request fields read: messages, tools, tool_choice, response_format,
// add_generation_prompt (default true), and the thinking options `thinking`,
// `enable_thinking` (booleans), `reasoning_effort`, `thinking_effort`
// (strings), normalised here and nowhere else (chat_options). A JSON null
// counts as absent. The request is an ordered_json because argument objects
// keep their key order.
//
// Refused (InvalidArgument naming the field) exactly where the reference
// raises, plus where a value has a type the reference would only str():
// names, reasoning and text parts must be strings. Unknown roles and
// non-object messages are skipped as the reference skips them; callers that
// want them refused (the HTTP and gRPC parsers) refuse them first.
//
// Thread-safe (no shared state).
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "shared/chat/segment.h"
#include "shared/status.h"

namespace k3::chat {

// The reference's image placeholder: an image content part renders as this
// one markup segment.
inline constexpr std::string_view kImagePlaceholder = "<|kimi_image_placeholder|>";

// The efforts the model knows (sorted, as the reference lists them).
inline constexpr std::string_view kThinkingEfforts = "high, low, max";

struct RenderOptions {
  // OpenAI's `developer` role rendered as `system` (the gateway's deviation;
  // off, the role is skipped as the reference skips it).
  bool developer_as_system = false;
};

// The thinking options after the reference's normalisation
// (_normalize_vllm_chat_options): `thinking`, else `enable_thinking`, else
// true; reasoning_effort "none" turns thinking off, any other value is the
// effort unless thinking_effort is given; the effort defaults to "max" and
// must be one of kThinkingEfforts even when thinking is off.
struct ChatOptions {
  bool thinking = true;
  std::string effort = "max";
};
StatusOr<ChatOptions> chat_options(const nlohmann::ordered_json& request);

// The segments of the prompt, or InvalidArgument naming the field (e.g.
// "messages[2].tool_calls[0]: ...") for a request the format refuses.
StatusOr<Segments> render_chat(const nlohmann::ordered_json& request,
                               const RenderOptions& options = {});

// Whether the request asks for the think channel (chat_options().thinking):
// the output parser starts in the channel the generation prompt opened.
StatusOr<bool> thinking_enabled(const nlohmann::ordered_json& request);

}  // namespace k3::chat
