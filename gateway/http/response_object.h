// What every OpenAI response object carries, chat's and completions' alike:
// the id/object/created/model head, the usage, and the last stream chunk
// that carries only the usage.
//
// Thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <string_view>

#include <nlohmann/json.hpp>

#include "gateway/core/api_types.h"

namespace k3::gateway {

// {"id", "object", "created", "model"}.
nlohmann::json base_object(std::string_view id, int64_t created, std::string_view model,
                           std::string_view object);

// {"prompt_tokens", "completion_tokens", "total_tokens",
//  "prompt_tokens_details": {"cached_tokens"}, "k3_restored_tokens"}.
nlohmann::json usage_json(const Usage& usage);

// The last chunk with stream_options.include_usage: "choices": [] and usage.
// `chat` picks the object name (chat.completion.chunk or text_completion).
nlohmann::json usage_chunk_json(std::string_view id, int64_t created, std::string_view model,
                                const Usage& usage, bool chat);

}  // namespace k3::gateway
