// The fields each JSON request object may carry, as docs/openai-api.md lists
// them (its endpoint tables and "Objects inside requests"): a field not
// listed is what the request's UnknownFields policy says (field_reader.h):
// ignored, erased and named by its path ("messages[1].tool_calls[0].index")
// in x-k3-ignored-fields, or under --strict-fields refused with 400
// invalid_request_error naming it, the path in the error's `param`. A field
// whose value is null counts as absent (OpenAI's clients send null for "not
// given"). Only names are checked here; values are the
// parsers' (chat_protocol.h, completion_protocol.h, the renderer, the
// output form: gateway/core/output_form_request.h).
// tests/gateway/http/request_fields_test.cpp holds these lists to the doc.
//
// Thread-safe (constant tables).
#pragma once

#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/http/field_reader.h"
#include "shared/status.h"

namespace k3::gateway {

// One kind of object and its fields, named as in docs/openai-api.md: an
// endpoint ("/v1/chat/completions") or a nested object ("tools[].function").
struct RequestObject {
  std::string_view name;
  std::vector<std::string_view> fields;
};

// Every kind of object, the endpoints first.
const std::vector<RequestObject>& request_objects();

// Checks the body of `endpoint` (one of request_objects()'s endpoints) and,
// for chat, every nested object of it: messages by role, their content
// parts and tool calls, tools, tool_choice, response_format, stream_options,
// thinking, chat_template_kwargs, by `unknown`'s policy (the fields it
// ignores are erased from `body`). Objects of the wrong type are left to the
// parsers, which name the type error.
Status check_request_fields(std::string_view endpoint, nlohmann::ordered_json& body,
                            UnknownFields& unknown);

}  // namespace k3::gateway
