// POST /v1/responses (OpenAI's Responses API) in its own shapes: the body
// parsed into the ChatCall chat completions use (input items become chat
// messages, instructions a system message, flat function tools chat's nested
// ones, text.format chat's response_format, reasoning.effort the model's
// effort), so generation runs through the same core; and the response object
// built around the output items (responses_events.h builds those). Every
// field is served, accepted with no effect, or refused by name as
// docs/responses-api.md lists it; a field it does not list is refused,
// naming its path.
//
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/core/api_types.h"
#include "gateway/http/field_reader.h"
#include "shared/status.h"

namespace k3::gateway {

// A parsed request: the core's request, and the settings every response
// object echoes (instructions, max_output_tokens, parallel_tool_calls,
// reasoning, temperature, text, tool_choice, tools, top_p, metadata, user...).
struct ResponsesCall {
  ChatCall chat;
  nlohmann::json echo = nlohmann::json::object();
};

// The body of POST /v1/responses; InvalidArgument naming the field
// ("'input[2].call_id' ...") for a body the Responses API would refuse or
// that asks for what this server does not do (previous_response_id,
// conversation, built-in tools, images...). A field no list of
// docs/responses-api.md has goes to `unknown` (ignored and recorded, or
// refused under --strict-fields), as on chat completions.
StatusOr<ResponsesCall> parse_responses_request(std::string_view body, UnknownFields& unknown);
// The same refusing every field the doc does not list (gateway --strict-fields).
StatusOr<ResponsesCall> parse_responses_request(std::string_view body);

// The body's fields, served, accepted or refused by name, as
// docs/responses-api.md's "POST /v1/responses" table lists them; any other
// is refused as not supported.
const std::vector<std::string_view>& responses_body_fields();

// reasoning.effort in the model's words, the table chat and messages share:
// none -> "none" (thinking off), minimal/low -> low, medium/high -> high,
// xhigh/max -> max; anything else InvalidArgument naming reasoning.effort.
StatusOr<std::string> responses_effort(std::string_view effort);

// What identifies one response: its id ("resp_..."), created_at (Unix
// seconds), the model, and the request's echoed settings.
struct ResponseHead {
  std::string id;
  int64_t created_at = 0;
  std::string model;
  nlohmann::json echo = nlohmann::json::object();
};

// The response's state, as its `status` names it.
enum class ResponseStatus { kInProgress, kCompleted, kIncomplete, kFailed };
const char* response_status_name(ResponseStatus s);

// {"input_tokens", "input_tokens_details": {"cached_tokens"}, "output_tokens",
//  "output_tokens_details": {"reasoning_tokens"}, "total_tokens",
//  "k3_restored_tokens"}.
nlohmann::json responses_usage_json(const Usage& usage, int64_t reasoning_tokens);

// The response object ("object": "response") with `output` (its items) and
// `status`: usage null unless given; incomplete_details
// {"reason": "max_output_tokens"} when incomplete; `error` (error_json's
// inner object) when failed, else null.
nlohmann::json response_json(const ResponseHead& head, ResponseStatus status,
                             const nlohmann::json& output, const nlohmann::json& usage,
                             const nlohmann::json& error = nullptr);

}  // namespace k3::gateway
