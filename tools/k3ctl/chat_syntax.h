// What a `k3ctl chat` user types means: a message for the model, one of the
// local /commands, or a line of a `"""` multi-line block. Pure functions and
// small value types, no terminal and no network.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace k3::tools {

// One line the user entered, interpreted.
struct ChatCommand {
  enum class Kind {
    kMessage,  // text: send `text` to the model
    kHelp,
    kReset,
    kSystem,  // text: the new system message ("" clears it)
    kThink,   // text: off | on | low | high | max
    kSave,    // text: the file
    kLoad,    // text: the file
    kStats,
    kQuit,
    kEmpty,  // nothing but white space: ignored
    kError,  // text: why the line is refused (never sent to the model)
  };
  Kind kind = Kind::kEmpty;
  std::string text;
};

// Interprets one complete entry (a line, a paste or a finished `"""` block).
// A line starting with '/' is a command; "//" starts a message that begins
// with one '/'. Unknown commands and wrong arguments are kError.
ChatCommand parse_chat_command(std::string_view entry);

// The /help text: one line per command.
std::string chat_help_text();

// Assembles `"""` blocks (as in `ollama run`): a line whose text starts with
// `"""` opens a block that runs to the line ending with `"""`; the lines in
// between are joined with '\n'. Any other line is a whole entry. Not
// thread-safe.
class MultilineAssembler {
 public:
  // Feeds one line (without its '\n'). True when an entry is complete (then
  // *entry holds it); false while a block is open.
  bool add_line(std::string_view line, std::string* entry);
  bool in_block() const { return in_block_; }
  // Drops an open block (Ctrl-C in the middle of one).
  void discard() {
    in_block_ = false;
    lines_.clear();
  }

 private:
  bool in_block_ = false;
  std::vector<std::string> lines_;  // the open block's lines so far
};

}  // namespace k3::tools
