#include "tools/k3ctl/chat_syntax.h"

#include <utility>

namespace k3::tools {
namespace {

constexpr std::string_view kQuotes = R"(""")";
constexpr std::string_view kSpace = " \t\r\n";

std::string_view trim(std::string_view s) {
  const size_t b = s.find_first_not_of(kSpace);
  if (b == std::string_view::npos) return {};
  return s.substr(b, s.find_last_not_of(kSpace) - b + 1);
}

ChatCommand make(ChatCommand::Kind kind, std::string text = "") {
  return ChatCommand{kind, std::move(text)};
}

ChatCommand error(std::string why) {
  return make(ChatCommand::Kind::kError, std::move(why));
}

// A command that takes no argument.
ChatCommand bare(ChatCommand::Kind kind, std::string_view name, std::string_view arg) {
  if (!arg.empty()) return error(std::string(name) + " takes no argument");
  return make(kind);
}

}  // namespace

ChatCommand parse_chat_command(std::string_view entry) {
  const std::string_view t = trim(entry);
  if (t.empty()) return make(ChatCommand::Kind::kEmpty);
  if (t[0] != '/') return make(ChatCommand::Kind::kMessage, std::string(entry));
  if (t.size() > 1 && t[1] == '/') {
    // "//text" sends "/text": the escape for a message that starts with '/'.
    const size_t slash = entry.find('/');
    return make(ChatCommand::Kind::kMessage, std::string(entry.substr(slash + 1)));
  }
  const size_t name_end = t.find_first_of(kSpace);
  const std::string_view name = t.substr(0, name_end);
  const std::string_view arg =
      name_end == std::string_view::npos ? std::string_view() : trim(t.substr(name_end));
  using K = ChatCommand::Kind;
  if (name == "/help" || name == "/?") return bare(K::kHelp, name, arg);
  if (name == "/reset" || name == "/clear") return bare(K::kReset, name, arg);
  if (name == "/stats") return bare(K::kStats, name, arg);
  if (name == "/quit" || name == "/exit" || name == "/bye") return bare(K::kQuit, name, arg);
  if (name == "/system") return make(K::kSystem, std::string(arg));
  if (name == "/think") {
    // The model's efforts; on is its default, max.
    if (arg == "off" || arg == "on" || arg == "low" || arg == "high" || arg == "max")
      return make(K::kThink, std::string(arg));
    return error("/think takes off, on, low, high or max" +
                 (arg.empty() ? std::string() : ", not '" + std::string(arg) + "'"));
  }
  if (name == "/save" || name == "/load") {
    if (arg.empty()) return error(std::string(name) + " needs a FILE");
    return make(name == "/save" ? K::kSave : K::kLoad, std::string(arg));
  }
  return error("unknown command " + std::string(name) +
               " (not sent to the model; /help lists the commands, //TEXT sends TEXT "
               "starting with '/')");
}

std::string chat_help_text() {
  return "/help             this list\n"
         "/reset            forget the conversation (keeps /system and /think)\n"
         "/system TEXT      set the system message (/system alone removes it)\n"
         "/think MODE       off | on | low | high | max: thinking and its effort\n"
         "                  (on = max, the model's default effort)\n"
         "/save FILE        write the conversation as JSON\n"
         "/load FILE        read a conversation written by /save\n"
         "/stats            token counts and speed of the last reply and the session\n"
         "/quit             exit (also Ctrl-D on an empty line)\n"
         "\"\"\"               opens a multi-line message; a line ending with \"\"\" closes it\n"
         "//TEXT            sends /TEXT to the model\n"
         "Ctrl-C stops a reply; Ctrl-R searches the history; a paste is one message.\n";
}

bool MultilineAssembler::add_line(std::string_view line, std::string* entry) {
  if (!in_block_) {
    const std::string_view t = trim(line);
    if (t.substr(0, kQuotes.size()) != kQuotes) {
      entry->assign(line);
      return true;
    }
    std::string_view rest = t.substr(kQuotes.size());
    // `"""text"""` on one line is a whole entry.
    if (rest.size() >= kQuotes.size() && rest.substr(rest.size() - kQuotes.size()) == kQuotes) {
      entry->assign(rest.substr(0, rest.size() - kQuotes.size()));
      return true;
    }
    in_block_ = true;
    lines_.clear();
    if (!rest.empty()) lines_.emplace_back(rest);  // `"""text` starts with text
    return false;
  }
  const std::string_view right = line.substr(0, line.find_last_not_of(kSpace) + 1);
  const bool closes =
      right.size() >= kQuotes.size() && right.substr(right.size() - kQuotes.size()) == kQuotes;
  if (!closes) {
    lines_.emplace_back(line);
    return false;
  }
  // Text before the closing quotes is the block's last line.
  if (right.size() > kQuotes.size())
    lines_.emplace_back(right.substr(0, right.size() - kQuotes.size()));
  entry->clear();
  for (size_t i = 0; i < lines_.size(); ++i) {
    if (i > 0) *entry += '\n';
    *entry += lines_[i];
  }
  discard();
  return true;
}

}  // namespace k3::tools
