// The Messages API's stream (Anthropic's server-sent events) built from the
// core's deltas: message_start, then per content block content_block_start,
// its deltas (thinking_delta, text_delta, input_json_delta) and
// content_block_stop, then message_delta (stop_reason, stop_sequence,
// usage) and message_stop; `event: ping` while there is nothing to send
// (queued, prefill, keep-alive: its data carries the progress), and
// `event: error` for a failure after the stream began. Each function returns
// the SSE text to write ("event: NAME\ndata: JSON\n\n").
//
// Not thread-safe: one per stream, driven by the request's thread.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "gateway/core/api_types.h"
#include "shared/status.h"

namespace k3::gateway {

// "event: NAME\ndata: JSON\n\n".
std::string messages_sse(std::string_view name, const nlohmann::json& data);

class MessagesEventWriter {
 public:
  MessagesEventWriter(std::string id, std::string model)
      : id_(std::move(id)), model_(std::move(model)) {}

  // message_start: the message with no content yet; usage input_tokens the
  // prompt's tokens (the final split into input and cache read comes in
  // message_delta), output_tokens 0.
  std::string start(int64_t prompt_tokens) const;
  // The events of one delta: a block of another kind (or another tool call)
  // closes the open one and opens its own; thinking opens a thinking block
  // (signature ""), text a text block, a tool call a tool_use block (id,
  // name, input {}) whose arguments follow as input_json_delta.
  std::string delta(const OutputDelta& d);
  // The end: the open block closed, message_delta with stop_reason,
  // stop_sequence and usage (messages_usage_json), message_stop.
  std::string finish(FinishReason reason, const std::optional<std::string>& stop_sequence,
                     const Usage& usage);
  // `event: ping` for a progress note ({"type": "ping"} plus "k3_progress":
  // {"phase": "queued"|"prefill"|"keep_alive", "queued" or "done", "total",
  // "eta_s"}); "" for kAdmitted.
  static std::string ping(const ProgressNote& note);
  // `event: error` (messages_error_json).
  static std::string error(const Status& status);

  // Content blocks opened so far.
  int blocks() const { return next_index_; }

 private:
  enum class Block { kNone, kThinking, kText, kToolUse };
  // Closes the open block (if any) and opens `kind` with `start_block`.
  std::string open(Block kind, nlohmann::json start_block);
  std::string close();

  std::string id_;
  std::string model_;
  Block open_ = Block::kNone;
  int index_ = -1;        // the open block's index
  int next_index_ = 0;    // the next block's
  size_t tool_call_ = 0;  // the open tool_use block's call index
};

}  // namespace k3::gateway
