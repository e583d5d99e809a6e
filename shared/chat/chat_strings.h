// The exact texts of XTML's synthesized system messages (CHAT_STRINGS.md): the
// model was trained on them, so they are reproduced byte for byte. `{JSON}`
// and `EFFORT` are filled in by the renderer; bodies are then stripped.
#pragma once

#include <string_view>

namespace k3::chat::strings {

// message role="system" type="tool-declare", at the start of the prompt.
inline constexpr std::string_view kToolDeclareHead =
    "# Tools\nHere are the available tools, described in JSONSchema.\n\n```json\n";
// The same type for a system message that carries `tools` mid-conversation.
inline constexpr std::string_view kToolDeclareMidHead =
    "## New Tools Available\nThe system dynamically extends the toolset via lazy-loading.\n"
    "You have access to all existing and extended tools.\n"
    "Here are the specs for the extended tools.\n\n```json\n";
inline constexpr std::string_view kJsonTail = "\n```";

// type="thinking-effort"; EFFORT follows the head, then kThinkingEffortTail.
inline constexpr std::string_view kThinkingEffortHead =
    "`thinking_effort` guides on how much to think in your thinking channel (not including the "
    "response channel), supported values include `low`, `medium`, `high`, and `max`.\n"
    "Now the system is invoked with `thinking_effort=";
inline constexpr std::string_view kThinkingEffortTail = "`.";

// type="tool-choice".
inline constexpr std::string_view kToolChoiceRequired =
    "The system is invoked with `tool_choice=required`.\nYou MUST call tools in the next message.";
inline constexpr std::string_view kToolChoiceNone =
    "The system is invoked with `tool_choice=none`.\n"
    "You MUST NOT call any tools in the next message.";

// type="response-format".
inline constexpr std::string_view kResponseFormatJsonObject =
    "The system is invoked with `response_format=json_object`.\n"
    "Your response must be raw JSON data without markdown code blocks (```json) or any additional "
    "formatting.";
inline constexpr std::string_view kResponseFormatJsonSchemaHead =
    "The system is invoked with `response_format=json_schema`.\n"
    "Your response must be raw JSON data without markdown code blocks (```json) or any additional "
    "formatting.\nThe JSON data must match the following schema:\n```json\n";

// The type attributes of the synthesized system messages.
inline constexpr std::string_view kTypeToolDeclare = "tool-declare";
inline constexpr std::string_view kTypeThinkingEffort = "thinking-effort";
inline constexpr std::string_view kTypeToolChoice = "tool-choice";
inline constexpr std::string_view kTypeResponseFormat = "response-format";

}  // namespace k3::chat::strings
