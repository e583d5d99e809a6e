// Where `k3ctl chat` reads what the user enters: a line editor (libedit) on a
// terminal, plain lines from a pipe otherwise. Both give whole entries (a
// line, a bracketed paste, or a `"""` block) and stop when the interrupt fd
// (SigintRouter's) becomes readable, so Ctrl-C works while SIGINT is blocked
// in every thread.
#pragma once

#include <memory>
#include <string>

#include "shared/status.h"
#include "tools/k3ctl/chat_syntax.h"
#include "tools/k3ctl/interactive_input.h"

namespace k3::tools {

class ChatInput {
 public:
  enum class Result { kEntry, kEof, kInterrupted };
  virtual ~ChatInput() = default;
  // The next entry. kInterrupted: Ctrl-C at an empty prompt (a line being
  // typed or an open `"""` block is dropped instead, and reading goes on).
  virtual Result read(std::string* entry) = 0;
  // Remembers an entry in the history (a no-op without one).
  virtual void remember(const std::string& entry) = 0;
};

// Lines from a pipe or file through LineReader. Not thread-safe.
class PipeInput : public ChatInput {
 public:
  PipeInput(int fd, int interrupt_fd) : lines_(fd, interrupt_fd) {}
  Result read(std::string* entry) override;
  void remember(const std::string&) override {}

 private:
  LineReader lines_;
  MultilineAssembler blocks_;
};

// The history file: $XDG_STATE_HOME/k3serve/history, else
// $HOME/.local/state/k3serve/history; "" when neither variable is set.
std::string default_history_path();

// libedit on a terminal: emacs keys, Up/Down through the history, Ctrl-R
// incremental search, bracketed paste (ESC [?2004h while reading; the paste
// markers are bound so a pasted text, newlines and all, is one entry) and a
// history file kept mode 0600. Not thread-safe.
class LineEditor : public ChatInput {
 public:
  // `in_fd` must be a terminal; `history_path` "" keeps no file. A history
  // file that cannot be used is reported on stderr, not fatal.
  static StatusOr<std::unique_ptr<LineEditor>> open(int in_fd, int interrupt_fd,
                                                    const std::string& history_path);
  ~LineEditor() override;
  Result read(std::string* entry) override;
  void remember(const std::string& entry) override;

  struct Impl;

 private:
  explicit LineEditor(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3::tools
