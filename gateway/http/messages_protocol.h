// POST /v1/messages and POST /v1/messages/count_tokens in Anthropic's
// Messages shapes: the request body converted into the ChatCall chat
// completions run (api_types.h: the same render fields, sampling, stops and
// limits, so one generation path serves both APIs), and the response object,
// usage and error bodies built from the core's results. The stream's event
// sequence is messages_events.h; the routes are messages_route.h. No network
// here. docs/messages-api.md lists every field as served, ignored or refused.
//
// Thread-safe (no shared state).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/core/api_types.h"
#include "gateway/http/field_reader.h"
#include "gateway/http/http_message.h"
#include "shared/status.h"

namespace k3::gateway {

// What a request asks for beyond the ChatCall.
struct MessagesCall {
  // render: messages/tools/tool_choice/response_format/thinking;
  // thinking_budget: thinking.budget_tokens when thinking is enabled.
  ChatCall chat;
};

// The least thinking.budget_tokens: 1, not Anthropic's 1024 (at seconds
// per token a local model is better served by budgets of a few hundred).
inline constexpr int64_t kMinThinkingBudget = 1;

// Which body: /v1/messages needs max_tokens; count_tokens takes no
// generation fields (max_tokens, stream, sampling, stop_sequences).
enum class MessagesEndpoint { kCreate, kCountTokens };

// The body of POST /v1/messages (or count_tokens). InvalidArgument naming the
// field (its path in the error's param) for a body Anthropic would refuse, a
// field docs/messages-api.md refuses, or, under --strict-fields, a field it
// does not list; without it such a field goes to `unknown` (ignored,
// recorded), as on every route.
// Conversion: `system` -> a system message; user text blocks -> a user
// message, each tool_result -> a tool message (tool_call_id its
// tool_use_id); assistant text -> content, thinking -> reasoning_content,
// tool_use -> tool_calls (arguments: the input object); tools -> function
// tools (parameters: input_schema); tool_choice auto/any/tool/none -> auto /
// required / the named function / none, disable_parallel_tool_use ->
// parallel_tool_calls false; thinking is off unless thinking.type is
// "enabled" (or "adaptive"), its effort from output_config.effort when given
// (messages_effort), else from budget_tokens (budget_effort), and
// budget_tokens (at least kMinThinkingBudget, below max_tokens) is
// ChatCall::thinking_budget, which engined enforces;
// output_config.format json_schema -> response_format json_schema.
StatusOr<MessagesCall> parse_messages_request(std::string_view body, MessagesEndpoint endpoint,
                                              UnknownFields& unknown);
// The same refusing every field the doc does not list (gateway --strict-fields).
StatusOr<MessagesCall> parse_messages_request(std::string_view body, MessagesEndpoint endpoint);

// The top-level fields the endpoint's body may carry (docs/messages-api.md
// lists each as served, ignored or refused by name); any other is unknown.
const std::vector<std::string_view>& messages_request_fields(MessagesEndpoint endpoint);

// The effort table both Anthropic-shaped and OpenAI-shaped requests follow:
// none -> nullopt (thinking off), minimal/low -> low, medium/high -> high,
// xhigh/max -> max; InvalidArgument naming `field` for anything else.
StatusOr<std::optional<std::string>> messages_effort(std::string_view effort,
                                                     std::string_view field);
// thinking.budget_tokens as one of K3's efforts: up to 2048 low, up to 16384
// high, beyond max (docs/messages-api.md, "Thinking").
std::string budget_effort(int64_t budget_tokens);

// Anthropic's stop_reason: end_turn, stop_sequence (a stop string ended
// it), max_tokens, tool_use.
const char* messages_stop_reason(FinishReason reason, bool by_stop_sequence);

// {"input_tokens" (the prompt less the reused prefix), "output_tokens",
//  "cache_creation_input_tokens": 0, "cache_read_input_tokens" (the reused
//  prefix)}.
nlohmann::json messages_usage_json(const Usage& usage);

// The whole message: {"id", "type": "message", "role": "assistant",
// "model", "content": [thinking, text, tool_use...], "stop_reason",
// "stop_sequence", "usage"}. The thinking block is there whenever the model
// wrote any reasoning (a reply cut inside it included); a tool_use block's
// input is its arguments parsed ({} when a cut reply left them incomplete).
nlohmann::json messages_response_json(std::string_view id, std::string_view model,
                                      const ChoiceResult& choice,
                                      const std::optional<std::string>& stop_sequence,
                                      const Usage& usage);

// Anthropic's error type for an HTTP status: 400 invalid_request_error, 401
// authentication_error, 403 permission_error, 404 not_found_error, 413
// request_too_large, 429 rate_limit_error, 503 overloaded_error, other 5xx
// api_error (other 4xx: invalid_request_error).
const char* messages_error_type(int http_status);
// {"type": "error", "error": {"type", "message"}} for `status`.
nlohmann::json messages_error_json(const Status& status);
// The error as an HTTP response (status from http_status, status_codes.h;
// Retry-After on 429, as the chat routes).
HttpResponse messages_error_response(const Status& status);

}  // namespace k3::gateway
