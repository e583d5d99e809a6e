// POST /v1/completions in OpenAI's (legacy) shapes: the request body parsed
// and checked into a CompletionCall (api_types.h), and the response objects
// and stream chunks built from the generated text.
//
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/core/api_types.h"
#include "gateway/http/field_reader.h"
#include "shared/status.h"

namespace k3::gateway {

// The body of POST /v1/completions (prompt: a string, token ids, or a batch
// of exactly one of either); unlisted fields ignored or refused as
// `unknown`'s policy says, as in chat (chat_protocol.h).
StatusOr<CompletionCall> parse_completion_request(std::string_view body, UnknownFields& unknown);
// The same refusing every unlisted field (gateway --strict-fields).
StatusOr<CompletionCall> parse_completion_request(std::string_view body);

// A non-streamed completion ("object": "text_completion").
// logprobs (nullopt: not asked for): {"tokens", "token_logprobs",
// "top_logprobs", "text_offset"}, as OpenAI's legacy completions.
nlohmann::json completion_json(
    std::string_view id, int64_t created, std::string_view model, std::string_view text,
    const Finish& finish, const std::optional<std::vector<LogprobEntry>>& logprobs = std::nullopt);
// The same with n choices (each message's content is its text).
nlohmann::json completion_json(std::string_view id, int64_t created, std::string_view model,
                               const std::vector<ChoiceResult>& choices, const Usage& usage);
// One completion stream chunk of choice `index`; finish_reason null unless
// `finish` is set.
nlohmann::json completion_chunk_json(
    std::string_view id, int64_t created, std::string_view model, std::string_view text,
    std::optional<FinishReason> finish,
    const std::optional<std::vector<LogprobEntry>>& logprobs = std::nullopt, int index = 0);

}  // namespace k3::gateway
