// The gateway's plain request and result types: what the OpenAI HTTP adapter
// and the gRPC adapter both turn their wire formats into, and what the
// generation core (gateway/generation.h) takes and produces.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "shared/base/status.h"

namespace k3::gateway {

struct SamplingOptions {
  float temperature = 1.0f;  // 0 = greedy (OpenAI's default is 1)
  float top_p = 1.0f;
  std::optional<uint64_t> seed;  // unset: the gateway draws one
};

// A chat turn (POST /v1/chat/completions or gRPC Chat).
struct ChatCall {
  std::string model;  // "" = the gateway's model
  // Exactly the fields chat::render_chat reads: messages, tools, tool_choice,
  // response_format, thinking (bool), thinking_effort. Key order of argument
  // objects is kept (ordered_json).
  nlohmann::ordered_json render = nlohmann::ordered_json::object();
  int64_t max_tokens = 0;  // 0 = up to the context limit
  SamplingOptions sampling;
  std::vector<std::string> stop;  // at most 4, none empty
  bool stream = false;
  bool include_usage = false;       // stream_options.include_usage
  bool parallel_tool_calls = true;  // false: at most one tool call (enforced)
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
};

struct Usage {
  int64_t prompt_tokens = 0;
  int64_t completion_tokens = 0;
  int64_t cached_tokens = 0;    // continued from an engined session
  int64_t restored_tokens = 0;  // restored from a state checkpoint
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

// What one step of a generation adds.
struct OutputDelta {
  std::string reasoning_content;
  std::string content;  // for completions: the text
  std::vector<ToolCallOut> tool_calls;
  bool empty() const { return reasoning_content.empty() && content.empty() && tool_calls.empty(); }
};

// A finished generation: the whole message and how it ended.
struct ToolCallFull {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text
};
struct OutputMessage {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCallFull> tool_calls;
};
struct Finish {
  FinishReason reason = FinishReason::kStop;
  Usage usage;
};

// Checks shared by the HTTP and gRPC adapters (each checks its own wire types
// first); InvalidArgument naming the field, e.g. "'temperature' must be
// between 0 and 2". NaN is refused everywhere.
Status validate_sampling(const SamplingOptions& sampling);
// At most 4 stop strings, none empty.
Status validate_stop(const std::vector<std::string>& stop);

}  // namespace k3::gateway
