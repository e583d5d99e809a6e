#include "gateway/http/messages_events.h"

#include <utility>

#include "gateway/core/json_text.h"
#include "gateway/http/messages_protocol.h"

namespace k3::gateway {

using nlohmann::json;

std::string messages_sse(std::string_view name, const json& data) {
  return cat("event: ", name, "\ndata: ", dump_body(data), "\n\n");
}

std::string MessagesEventWriter::start(int64_t prompt_tokens) const {
  json message = {{"id", id_},
                  {"type", "message"},
                  {"role", "assistant"},
                  {"model", model_},
                  {"content", json::array()},
                  {"stop_reason", nullptr},
                  {"stop_sequence", nullptr},
                  {"usage",
                   {{"input_tokens", prompt_tokens},
                    {"output_tokens", 0},
                    {"cache_creation_input_tokens", 0},
                    {"cache_read_input_tokens", 0}}}};
  return messages_sse("message_start",
                      {{"type", "message_start"}, {"message", std::move(message)}});
}

std::string MessagesEventWriter::close() {
  if (open_ == Block::kNone) return "";
  open_ = Block::kNone;
  return messages_sse("content_block_stop", {{"type", "content_block_stop"}, {"index", index_}});
}

std::string MessagesEventWriter::open(Block kind, json start_block) {
  std::string out = close();
  open_ = kind;
  index_ = next_index_++;
  out += messages_sse("content_block_start", {{"type", "content_block_start"},
                                              {"index", index_},
                                              {"content_block", std::move(start_block)}});
  return out;
}

std::string MessagesEventWriter::delta(const OutputDelta& d) {
  std::string out;
  auto block_delta = [&](json delta) {
    out += messages_sse(
        "content_block_delta",
        {{"type", "content_block_delta"}, {"index", index_}, {"delta", std::move(delta)}});
  };
  if (!d.reasoning_content.empty()) {
    if (open_ != Block::kThinking)
      out += open(Block::kThinking, {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}});
    block_delta({{"type", "thinking_delta"}, {"thinking", d.reasoning_content}});
  }
  if (!d.content.empty()) {
    if (open_ != Block::kText) out += open(Block::kText, {{"type", "text"}, {"text", ""}});
    block_delta({{"type", "text_delta"}, {"text", d.content}});
  }
  for (const ToolCallOut& call : d.tool_calls) {
    if (!call.name.empty() || open_ != Block::kToolUse || tool_call_ != call.index) {
      out += open(
          Block::kToolUse,
          {{"type", "tool_use"}, {"id", call.id}, {"name", call.name}, {"input", json::object()}});
      tool_call_ = call.index;
    }
    if (!call.arguments.empty())
      block_delta({{"type", "input_json_delta"}, {"partial_json", call.arguments}});
  }
  return out;
}

std::string MessagesEventWriter::finish(FinishReason reason,
                                        const std::optional<std::string>& stop_sequence,
                                        const Usage& usage) {
  std::string out = close();
  out += messages_sse("message_delta",
                      {{"type", "message_delta"},
                       {"delta",
                        {{"stop_reason", messages_stop_reason(reason, stop_sequence.has_value())},
                         {"stop_sequence", stop_sequence ? json(*stop_sequence) : json(nullptr)}}},
                       {"usage", messages_usage_json(usage)}});
  out += messages_sse("message_stop", {{"type", "message_stop"}});
  return out;
}

std::string MessagesEventWriter::ping(const ProgressNote& note) {
  json progress;
  switch (note.phase) {
    case ProgressNote::Phase::kAdmitted:
      return "";
    case ProgressNote::Phase::kQueued:
      progress = {{"phase", "queued"}, {"queued", note.queued}};
      break;
    case ProgressNote::Phase::kPrefill:
    case ProgressNote::Phase::kKeepAlive:
      progress = {{"phase", note.phase == ProgressNote::Phase::kPrefill ? "prefill" : "keep_alive"},
                  {"done", note.done},
                  {"total", note.total}};
      if (note.eta_s >= 0) progress["eta_s"] = note.eta_s;
      break;
  }
  return messages_sse("ping", {{"type", "ping"}, {"k3_progress", std::move(progress)}});
}

std::string MessagesEventWriter::error(const Status& status) {
  return messages_sse("error", messages_error_json(status));
}

}  // namespace k3::gateway
