// A response's output items built from the core's deltas, and the Responses
// stream events that describe them as they grow (OpenAI's sequence, the one
// its SDK's stream helper accumulates):
//   response.created, response.in_progress;
//   per item: response.output_item.added, then
//     reasoning: response.content_part.added (reasoning_text),
//       response.reasoning_text.delta..., response.reasoning_text.done,
//       response.content_part.done (as vLLM and OpenAI's open-weight models
//       stream reasoning; K3's reasoning is its text, never a summary);
//     message: response.content_part.added (output_text),
//       response.output_text.delta..., response.output_text.done,
//       response.content_part.done;
//     function_call: response.function_call_arguments.delta...,
//       response.function_call_arguments.done;
//   response.output_item.done;
//   then response.completed, response.incomplete (the max_output_tokens
//   limit or the request deadline cut it) or response.failed.
// Every event carries "type" and "sequence_number" (0, 1, 2...). The
// non-streamed answer is the same builder's final response(), so both
// carry the same items.
//
// Not thread-safe: one per request, driven by its serving thread.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "gateway/core/api_types.h"
#include "gateway/http/responses_protocol.h"
#include "shared/status.h"

namespace k3::gateway {

class ResponseEvents {
 public:
  explicit ResponseEvents(ResponseHead head) : head_(std::move(head)) {}

  // response.created and response.in_progress (no output yet).
  std::vector<nlohmann::json> start();
  // One delta of choice 0: the events of its reasoning, then its text, then
  // its tool-call fragments; a part of another kind than the open item's
  // closes it and opens a new item.
  std::vector<nlohmann::json> on_delta(const OutputDelta& delta);
  // The end: the open item closed (its .done events; "incomplete" when
  // `reason` is length), then response.completed, or response.incomplete
  // with incomplete_details.reason "max_output_tokens" for length.
  // `reasoning_tokens` is the choice's (OutputMessage::reasoning_tokens):
  // output_tokens_details.reasoning_tokens.
  std::vector<nlohmann::json> finish(FinishReason reason, const Usage& usage,
                                     int64_t reasoning_tokens);
  // A failure after start: the open item closed as incomplete, then
  // response.failed with {"code", "message"}.
  std::vector<nlohmann::json> fail(const Status& status);

  // The response as it stands: in progress until finish or fail.
  nlohmann::json response() const;

 private:
  enum class Kind { kNone, kReasoning, kMessage, kCall };
  nlohmann::json event(std::string_view type, nlohmann::json fields);
  // Opens an item of `kind` (closing the open one); `call` for a call.
  void open(Kind kind, std::vector<nlohmann::json>& out, const ToolCallOut* call = nullptr);
  void close(bool complete, std::vector<nlohmann::json>& out);
  void append_text(Kind kind, const std::string& text, std::vector<nlohmann::json>& out);

  ResponseHead head_;
  std::vector<nlohmann::json> output_;  // the items, the last one open when kind_ is set
  Kind kind_ = Kind::kNone;
  std::string text_;       // the open item's text or arguments so far
  size_t call_index_ = 0;  // the open call's index among the core's tool calls
  int64_t sequence_ = 0;
  ResponseStatus status_ = ResponseStatus::kInProgress;
  nlohmann::json usage_ = nullptr;
  nlohmann::json error_ = nullptr;
};

// One event as Server-Sent Events: "event: TYPE\ndata: JSON\n\n".
std::string responses_sse(const nlohmann::json& event);

}  // namespace k3::gateway
