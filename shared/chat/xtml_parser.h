// Parses the model's XTML output back into an OpenAI assistant message:
// think channel -> reasoning_content, response channel -> content, tool calls
// -> tool_calls with JSON arguments rebuilt from the typed argument elements
// (a `json` element passed as is). Control tokens never reach the user.
// Incremental: feed text and control tokens as they are generated and get
// deltas back (the gateway streams them).
//
// Robustness: the model may stop anywhere (max_tokens) or write malformed
// markup. Text is never dropped: text outside any channel goes to content,
// the header of a tag that never completes to the channel it appears in, an
// unknown element's text to the channel around it; a close tag closes the innermost element of that
// name (and those inside it); a stray <|sep|> or close tag is ignored; at the
// end every open element is closed (a cut-off call keeps the arguments it
// completed, and an argument cut off keeps its partial value).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace k3::chat {

// A control token of the output stream.
enum class Control {
  kOpen,
  kClose,
  kSep,
  kEndOfMsg,
  kOther,  // any other special token: never shown, otherwise ignored
};

struct ToolCall {
  std::string name;
  std::string arguments;  // JSON text
  bool operator==(const ToolCall&) const = default;
};

// One step of the stream. A tool call first appears with its name, then its
// arguments arrive in fragments that concatenate to the final JSON text.
struct ToolCallDelta {
  size_t index = 0;                 // position among the message's calls, 0-based
  std::optional<std::string> name;  // set on the call's first delta
  std::string arguments;
  bool operator==(const ToolCallDelta&) const = default;
};

struct ChatDelta {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCallDelta> tool_calls;
  bool empty() const { return reasoning_content.empty() && content.empty() && tool_calls.empty(); }
};

// The whole message parsed so far.
struct ParsedMessage {
  std::string reasoning_content;
  std::string content;
  std::vector<ToolCall> tool_calls;
  bool ended = false;  // <|end_of_msg|> seen (else the stream was cut off)
};

// Not thread-safe: one per generation.
class OutputParser {
 public:
  // `thinking`: the generation prompt opened the think channel (else the
  // response channel) inside the assistant message.
  explicit OutputParser(bool thinking);

  // Each call appends what it completes to *delta (which may be null).
  void feed_text(std::string_view text, ChatDelta* delta);
  void feed_control(Control control, ChatDelta* delta);
  // End of the stream: closes whatever is open. Idempotent.
  void finish(ChatDelta* delta);

  const ParsedMessage& message() const { return message_; }
  // <|end_of_msg|> seen or finish() called: later input is ignored.
  bool done() const { return done_; }

 private:
  enum class Kind { kMessage, kThink, kResponse, kTools, kCall, kArgument, kJson, kOther };
  struct Element {
    Kind kind;
    std::string tag;
    std::string key;   // argument: its key
    std::string type;  // argument: its type
    std::string text;  // argument / json: the value so far
  };
  enum class Mode { kBody, kOpenHeader, kCloseHeader };

  void route_text(std::string_view text, ChatDelta* delta);
  void abandon_header(ChatDelta* delta);
  void open_element(std::string_view header, ChatDelta* delta);
  void close_element(std::string_view tag, ChatDelta* delta);
  void finalize(Element& element, ChatDelta* delta);
  void append_arguments(std::string_view fragment, ChatDelta* delta);
  // The delta's entry for call `index` (delta not null).
  static ToolCallDelta& call_delta(ChatDelta* delta, size_t index);
  bool in_call() const;

  std::vector<Element> stack_;
  Mode mode_ = Mode::kBody;
  std::string header_;
  ParsedMessage message_;
  // The call being written: whether it got structured arguments (`{` sent)
  // or a raw json element.
  bool call_has_object_ = false;
  bool call_has_raw_ = false;
  bool done_ = false;
};

// Parses a whole output written as text with the four control tokens inline
// (for tests and for engines that hand back text): every occurrence of
// <|open|>, <|close|>, <|sep|>, <|end_of_msg|> is taken as that token.
ParsedMessage parse_output_text(std::string_view text, bool thinking);

// An argument element's value as JSON: a string element's text as a JSON
// string; any other type's text as is when it is valid JSON (trimmed), else
// as a JSON string (never lost).
std::string argument_json(std::string_view type, std::string_view text);

}  // namespace k3::chat
