// The gateway's plain request and result types: what the OpenAI HTTP adapter
// and the gRPC adapter both turn their wire formats into, and what the
// generation core (gateway/core/generator.h) takes and produces.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shared/api/request_limits.h"
#include "shared/status.h"

namespace k3::gateway {

// The sampling fields a client sent (unset: the model's default, see
// gateway/core/sampling_defaults.h). Ranges: check_client_sampling.
struct SamplingOptions {
  std::optional<float> temperature;  // 0 = greedy
  std::optional<float> top_p;
  std::optional<int64_t> top_k;  // 0 or -1 = no limit
  std::optional<float> min_p;
  std::optional<float> presence_penalty;
  std::optional<float> frequency_penalty;
  std::optional<float> repetition_penalty;
  std::map<int32_t, float> logit_bias;  // token id -> bias (-100 bans)
  std::optional<uint64_t> seed;         // unset: the gateway draws one
  // k3 extension: routed-expert top-p in (0, 1]; unset: engined's setting.
  std::optional<float> expert_top_p;
};

// A chat turn (POST /v1/chat/completions or gRPC Chat).
struct ChatCall {
  std::string model;  // "" = the gateway's model
  // Exactly the fields chat::render_chat reads: messages, tools, tool_choice,
  // response_format, and the thinking options it normalises (thinking,
  // enable_thinking, reasoning_effort, thinking_effort). Key order of argument
  // objects is kept (ordered_json).
  nlohmann::ordered_json render = nlohmann::ordered_json::object();
  int64_t max_tokens = 0;  // 0 = up to the context limit
  SamplingOptions sampling;
  std::vector<std::string> stop;  // at most 4, none empty
  bool stream = false;
  bool include_usage = false;       // stream_options.include_usage
  bool logprobs = false;            // each output token's log-probability
  int top_logprobs = 0;             // and the this many most likely (0-20)
  bool tokens_as_ids = false;       // vLLM's return_tokens_as_token_ids
  bool parallel_tool_calls = true;  // false: at most one tool call (enforced)
  int n = 1;                        // choices, in [1, api::kMaxChoices]
  // With thinking on: the think channel's tokens at most, enforced by
  // engined (OutputConstraint.think_budget_tokens; the Messages API's
  // thinking.budget_tokens); 0: no limit.
  int64_t thinking_budget = 0;
};

// A raw completion (POST /v1/completions or gRPC Complete).
struct CompletionCall {
  std::string model;
  // Exactly one form: text, or token ids (OpenAI allows an array of ints).
  std::string prompt;
  std::vector<int32_t> prompt_ids;
  bool prompt_is_ids = false;
  int64_t max_tokens = 16;  // OpenAI's default for completions
  SamplingOptions sampling;
  std::vector<std::string> stop;
  bool stream = false;
  bool include_usage = false;
  bool echo = false;  // prepend the prompt text to the completion
  // Completions' logprobs: unset = none; N = each token's and the N most
  // likely (0-20).
  std::optional<int> logprobs;
  bool tokens_as_ids = false;
  int n = 1;  // choices, in [1, api::kMaxChoices]
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  // Prompt tokens engined did not compute again: continued from a session's
  // state plus restored (restored_tokens).
  int64_t cached_tokens = 0;
  // Of cached_tokens, those restored from a saved state (a turn checkpoint or
  // a prefix snapshot).
  int64_t restored_tokens = 0;
};

// What a request is doing while it has no output to send, for the client's
// progress display and to keep proxies from dropping a quiet stream (HTTP:
// SSE comment lines, sse.h; gRPC: Progress events). The core sends one at
// least every GeneratorOptions::progress_interval_s from the moment the
// request is queued or admitted until it ends.
struct ProgressNote {
  enum class Phase {
    kQueued,    // waiting for admission at place `queued`
    kAdmitted,  // admitted (once, before engined is asked): a stream opens now
    kPrefill,   // engined reported the prompt's reading (done, total, eta_s)
    kKeepAlive  // nothing new; done/total/eta_s repeat the last report
  };
  Phase phase = Phase::kKeepAlive;
  int64_t queued = 0;  // kQueued: place in the admission queue, 1 = next
  // engined's last report of the prompt's reading (0/0 before any): prompt
  // tokens computed of those it computes (after reuse), and the estimated
  // seconds left (negative: unknown).
  int64_t done = 0;
  int64_t total = 0;
  double eta_s = -1;
};

enum class FinishReason { kStop, kLength, kToolCalls };
// "stop", "length", "tool_calls".
const char* finish_reason_name(FinishReason r);

// One streamed tool-call fragment, as OpenAI streams them: the first delta of
// a call carries id and name, later ones argument fragments.
struct ToolCallOut {
  size_t index = 0;
  std::string id;    // set on the first delta ("call_...")
  std::string name;  // set on the first delta
  std::string arguments;
};

// A token's log-probability: the model's log-softmax at its position before
// any sampling processor (logit_bias, penalties, temperature...).
struct TokenLogprob {
  int32_t id = 0;
  std::string token;  // its text ("token_id:N" with tokens_as_ids)
  std::string bytes;  // its bytes (a control token: its content)
  float logprob = 0;
};
// One generated token's, with the most likely ones at its position.
struct LogprobEntry : TokenLogprob {
  std::vector<TokenLogprob> top;  // best first
  int64_t text_offset = 0;        // completions: byte offset of the token in the text
};

// What one step of a generation adds.
struct OutputDelta {
  int index = 0;  // the choice (0..n-1)
  std::string reasoning_content;
  std::string content;  // for completions: the text
  std::vector<ToolCallOut> tool_calls;
  // Set (possibly empty) when the request asked for logprobs: every
  // generated token's, reasoning and control tokens included, in order.
  std::optional<std::vector<LogprobEntry>> logprobs;
  // Set on the choice's last delta: how it ended (the text is all out).
  std::optional<FinishReason> finish;
  // With finish: the stop string that ended it (finish kStop), if one did.
  std::optional<std::string> stop_sequence;
  bool empty() const {
    return reasoning_content.empty() && content.empty() && tool_calls.empty() &&
           (!logprobs || logprobs->empty()) && !finish;
  }
};

// A finished generation: the whole message and how it ended.
struct ToolCallFull {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text
};
struct OutputMessage {
  std::string reasoning_content;
  // Generated tokens whose text went to reasoning_content (a token whose
  // bytes complete no character yet, and control tokens, are not counted).
  int64_t reasoning_tokens = 0;
  std::string content;
  std::vector<ToolCallFull> tool_calls;
  std::optional<std::vector<LogprobEntry>> logprobs;  // as in OutputDelta
};
struct Finish {
  FinishReason reason = FinishReason::kStop;
  Usage usage;
};
// One of a request's choices, finished; choices[i] is index i.
struct ChoiceResult {
  OutputMessage message;
  FinishReason reason = FinishReason::kStop;
  std::optional<std::string> stop_sequence =
      std::nullopt;  // the stop string that ended it, if one did
};

// Checks shared by the HTTP and gRPC adapters (each checks its own wire types
// first): the fields the client set, against the ranges engined applies too
// (shared/api/request_limits.h, validate_sampling: InvalidArgument naming the
// field, e.g. "'temperature' must be between 0 and 2"; ids beyond the
// vocabulary: RequestPreparer), and k3_expert_top_p in (0, 1].
Status check_client_sampling(const SamplingOptions& sampling);
// At most 4 stop strings, none empty.
Status validate_stop(const std::vector<std::string>& stop);

}  // namespace k3::gateway
