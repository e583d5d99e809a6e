// A `k3ctl chat` conversation: the messages so far plus what the user set with
// /system and /think, turned into each turn's ChatRequest, and saved / loaded
// as JSON (/save, /load).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "k3serve/v1/gateway.pb.h"
#include "shared/status.h"
#include "tools/k3ctl/gateway_client.h"

namespace k3::tools {

// The file format of /save: one JSON object
//   {"format": "k3serve-chat-1", "system": "...", "thinking": true,
//    "thinking_effort": "high" | "", "messages": [
//      {"role": "user" | "assistant", "content": "...",
//       "reasoning_content": "...",                          (assistant, optional)
//       "tool_calls": [{"id": "...", "name": "...", "arguments": "..."}]}]}
// Not thread-safe.
class Conversation {
 public:
  // Starts from the flags' --system, --no-thinking and --thinking-effort.
  explicit Conversation(const ChatOptions& options);

  const std::string& system() const { return system_; }
  void set_system(std::string system) { system_ = std::move(system); }
  bool thinking() const { return thinking_; }
  const std::string& effort() const { return effort_; }
  // off | on | low | high | max (as /think takes them); on sends no effort
  // (the model's default, max).
  Status set_think(std::string_view mode);
  // "off" or the effort the model runs with (low, high, max).
  std::string think_mode() const;

  const std::vector<k3serve::v1::ChatMessage>& messages() const { return messages_; }
  void add(k3serve::v1::ChatMessage message) { messages_.push_back(std::move(message)); }
  // Drops the last message (a failed or cancelled turn's user message).
  void drop_last() {
    if (!messages_.empty()) messages_.pop_back();
  }
  // Forgets the messages; the system message and thinking mode stay.
  void clear() { messages_.clear(); }

  // The next turn's request: `options`' model, sampling and limits with this
  // conversation's system message, thinking mode and messages.
  k3serve::v1::ChatRequest request(const ChatOptions& options) const;

  std::string to_json() const;
  // Replaces this conversation with the one in `text`; on error nothing
  // changes and the message says which field is wrong.
  Status load_json(std::string_view text);
  Status save(const std::string& path) const;
  Status load(const std::string& path);

 private:
  std::string system_;
  bool thinking_ = true;
  std::string effort_;  // "" | low | high | max
  std::vector<k3serve::v1::ChatMessage> messages_;
};

}  // namespace k3::tools
