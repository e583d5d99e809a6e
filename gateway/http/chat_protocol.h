// POST /v1/chat/completions in OpenAI's shapes: the request body parsed and
// checked into a ChatCall (api_types.h), and the response objects and
// stream chunks built from the generation's output. No network here: the
// HTTP server reads bodies and writes what these functions return.
//
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/core/api_types.h"
#include "gateway/http/field_reader.h"
#include "shared/status.h"

namespace k3::gateway {

// The body of POST /v1/chat/completions. InvalidArgument naming the field
// for a body OpenAI would refuse or that asks for what the gateway does not
// do (docs/openai-api.md); a field the doc does not list, nested objects
// included, is ignored (erased, its path recorded in `unknown`) or refused
// naming it, as `unknown`'s policy says (request_fields.h). The thinking
// options (thinking: a bool or {"type": "enabled"|"disabled"};
// enable_thinking; thinking_effort; each also in chat_template_kwargs, the
// top-level one winning; reasoning_effort) go to render as they are, for the
// renderer's normalisation (chat::chat_options), except OpenAI's
// reasoning_effort medium -> high and minimal -> low; an effort the model
// does not know is refused here, naming the field and the supported values.
StatusOr<ChatCall> parse_chat_request(std::string_view body, UnknownFields& unknown);
// The same refusing every field the doc does not list (gateway --strict-fields).
StatusOr<ChatCall> parse_chat_request(std::string_view body);

// A non-streamed chat answer ("object": "chat.completion"); the choice's
// logprobs are {"content": [{"token", "logprob", "bytes", "top_logprobs"}],
// "refusal": null} when asked for (message.logprobs set), else null.
nlohmann::json chat_completion_json(std::string_view id, int64_t created, std::string_view model,
                                    const OutputMessage& message, const Finish& finish);
// The same with n choices: "choices"[i] has "index" i; usage covers them all.
nlohmann::json chat_completion_json(std::string_view id, int64_t created, std::string_view model,
                                    const std::vector<ChoiceResult>& choices, const Usage& usage);
// One stream chunk carrying `delta`'s non-empty fields (choice delta.index);
// `first` (the choice's first chunk) adds
// role "assistant" (and content "" when the delta has neither content nor
// tool calls, as OpenAI's first chunk does).
nlohmann::json chat_chunk_json(std::string_view id, int64_t created, std::string_view model,
                               const OutputDelta& delta, bool first);
// The chunk that ends choice `index`: empty delta, finish_reason set.
nlohmann::json chat_finish_chunk_json(std::string_view id, int64_t created, std::string_view model,
                                      FinishReason reason, int index = 0);

}  // namespace k3::gateway
