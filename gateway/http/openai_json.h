// The OpenAI-compatible HTTP API's JSON: request bodies parsed and checked
// into the plain types of api_types.h, and the response, stream chunk and
// error objects built in OpenAI's shapes. No network here: the HTTP server
// (gateway/http/) reads bodies and writes what these functions return.
//
// Requests are parsed as ordered_json so that tool-call argument objects keep
// their key order all the way into the XTML prompt. Every function is
// thread-safe (no shared state).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/core/api_types.h"
#include "gateway/core/json_text.h"
#include "gateway/core/status_codes.h"
#include "shared/base/status.h"

namespace k3::gateway {

// The body of POST /v1/chat/completions. InvalidArgument naming the field
// for a body OpenAI would refuse or that asks for what the gateway does not
// do (docs/openai-api.md); a field the doc does not list is refused too,
// naming it (request_fields.h), nested objects included. Thinking switches, in
// increasing precedence: chat_template_kwargs.{enable_thinking, thinking},
// enable_thinking, thinking (bool, or {"type": "enabled"|"disabled"}); the
// effort: chat_template_kwargs.thinking_effort, reasoning_effort,
// thinking_effort. OpenAI's reasoning_effort maps to K3's efforts (low ->
// low, medium -> high, high -> max); thinking_effort takes K3's own (low,
// high, max); a value outside them is refused naming the field sent.
StatusOr<ChatCall> parse_chat_request(std::string_view body);

// Most logprobs asked for (chat's top_logprobs, completions' logprobs):
// engined's limit.
inline constexpr int kMaxTopLogprobs = 20;

// The body of POST /v1/completions (prompt: a string, token ids, or a batch
// of exactly one of either); unlisted fields refused as in chat.
StatusOr<CompletionCall> parse_completion_request(std::string_view body);

// ---- responses (OpenAI's shapes) ----

struct ModelEntry {
  std::string id;
  int64_t created = 0;  // Unix seconds
  std::string owned_by;
};

// {"prompt_tokens", "completion_tokens", "total_tokens",
//  "prompt_tokens_details": {"cached_tokens"}, "k3_restored_tokens"}.
nlohmann::json usage_json(const Usage& usage);

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
// The last chunk with stream_options.include_usage: "choices": [] and usage.
// `chat` picks the object name (chat.completion.chunk or text_completion).
nlohmann::json usage_chunk_json(std::string_view id, int64_t created, std::string_view model,
                                const Usage& usage, bool chat);
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
// GET /v1/models.
nlohmann::json models_json(const std::vector<ModelEntry>& models);

// ---- errors ----

// {"error": {"message", "type", "param", "code"}}: param the request field
// the error is about (with_param), else null; type
// "invalid_request_error" for 4xx, "server_error" for 5xx; code a short
// string ("invalid_argument", "model_not_found", "context_length_exceeded",
// "rate_limit_exceeded", "invalid_api_key", ...).
nlohmann::json error_json(const Status& status);

// ---- framing ----

// Compact JSON text for a response body. Invalid UTF-8 (a model can emit
// it) is replaced by U+FFFD instead of throwing, as nlohmann's dump would.
std::string dump_body(const nlohmann::json& j);
// "data: " + dump_body(j) + "\n\n".
std::string sse_event(const nlohmann::json& j);
// "data: [DONE]\n\n".
std::string sse_done();

}  // namespace k3::gateway
