// k3ctl chat (an interactive terminal client) and k3ctl complete (one request,
// for scripts): clients of the gateway's public gRPC API.
#include <sys/ioctl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <clocale>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tools/k3ctl/chat_input.h"
#include "tools/k3ctl/chat_progress.h"
#include "tools/k3ctl/chat_stats.h"
#include "tools/k3ctl/chat_syntax.h"
#include "tools/k3ctl/commands.h"
#include "tools/k3ctl/conversation.h"
#include "tools/k3ctl/gateway_client.h"
#include "tools/k3ctl/gateway_probe.h"
#include "tools/k3ctl/interactive_input.h"

namespace k3::tools {
namespace {

namespace v1 = k3serve::v1;

using Clock = std::chrono::steady_clock;

constexpr int kUsageError = 2;
// How long chat waits at start for the gateway's first answer (ListModels).
constexpr double kStartCheckSeconds = 10;
constexpr int kInterruptedExit = 130;  // the shell's code for "ended by SIGINT"
constexpr std::string_view kDim = "\x1b[2m";
constexpr std::string_view kResetStyle = "\x1b[0m";

void write_to(FILE* f, std::string_view text) {
  std::fwrite(text.data(), 1, text.size(), f);
}

void print_error(const std::string& what) {
  std::fprintf(stderr, "error: %s\n", what.c_str());
}

std::string tool_call_text(const v1::ToolCall& call) {
  return cat("[tool call ", call.name(), "(", call.arguments(), ")]\n");
}

// The terminal's width on stdout; 0 when unknown.
int terminal_columns() {
  winsize ws{};
  return ::ioctl(STDOUT_FILENO, TIOCGWINSZ, &ws) == 0 ? ws.ws_col : 0;
}

// A chat reply on the terminal: until its first text, where the request
// stands (one line rewritten in place; on stderr, line by line, when stdout
// is not a terminal); then the reasoning dimmed (or, when stdout is not a
// terminal, between "<think>" and "</think>" lines), then the content, then
// the tool calls. Not thread-safe.
class ChatPrinter : public ReplySink {
 public:
  explicit ChatPrinter(bool tty) : tty_(tty), progress_(tty, tty ? terminal_columns() : 0) {}

  void on_progress(const v1::Progress& p) override {
    if (first_) return;
    write_to(tty_ ? stdout : stderr, progress_.show(progress_text(p)));
    std::fflush(tty_ ? stdout : stderr);
  }
  void on_reasoning(std::string_view text) override {
    mark_first();
    if (!in_reasoning_) {
      // On a terminal the reasoning is dimmed and labelled (dim alone can be
      // invisible in some terminals' themes).
      write(tty_ ? cat(kDim, "[reasoning] ") : std::string("<think>\n"));
      in_reasoning_ = true;
    }
    write(text);
    std::fflush(stdout);
  }
  void on_content(std::string_view text) override {
    mark_first();
    end_reasoning();
    write(text);
    std::fflush(stdout);
  }
  void on_tool_call(const v1::ToolCall& call) override {
    mark_first();
    end_reasoning();
    end_line();
    write(tool_call_text(call));
    std::fflush(stdout);
  }
  // Closes the reply (also a cancelled or failed one) on a line of its own.
  void finish() {
    write_to(stdout, progress_.clear());
    end_reasoning();
    end_line();
    std::fflush(stdout);
  }
  // When the first piece of the reply arrived (nullopt: none did).
  std::optional<Clock::time_point> first_piece() const { return first_; }

 private:
  // The first piece of the reply: the progress line makes room for it.
  void mark_first() {
    if (first_) return;
    first_ = Clock::now();
    write_to(stdout, progress_.clear());
  }
  void write(std::string_view text) {
    if (text.empty()) return;
    write_to(stdout, text);
    at_line_start_ = text.back() == '\n';
  }
  void end_line() {
    if (!at_line_start_) write("\n");
  }
  void end_reasoning() {
    if (!in_reasoning_) return;
    in_reasoning_ = false;
    if (tty_) write(kResetStyle);
    end_line();
    if (!tty_) write("</think>\n");
  }

  const bool tty_;
  ProgressLine progress_;
  bool in_reasoning_ = false;
  bool at_line_start_ = true;
  std::optional<Clock::time_point> first_;
};

// `k3ctl complete`'s output: content to stdout, reasoning to stderr when asked
// for. Not thread-safe.
class CompletePrinter : public ReplySink {
 public:
  explicit CompletePrinter(bool show_reasoning) : show_reasoning_(show_reasoning) {}

  void on_reasoning(std::string_view text) override {
    if (!show_reasoning_ || text.empty()) return;
    write_to(stderr, text);
    reasoning_open_ = text.back() != '\n';
  }
  void on_content(std::string_view text) override {
    end_reasoning();
    write_to(stdout, text);
    std::fflush(stdout);
    content_printed_ = content_printed_ || !text.empty();
    content_ends_line_ = !text.empty() && text.back() == '\n';
  }
  void on_tool_call(const v1::ToolCall& call) override {
    on_content(cat(content_ends_line_ ? "" : "\n", tool_call_text(call)));
  }
  // The newline that ends the output (none after a failure that printed nothing).
  void finish(bool ok) {
    end_reasoning();
    if (ok || content_printed_) write_to(stdout, "\n");
    std::fflush(stdout);
  }

 private:
  void end_reasoning() {
    if (reasoning_open_) write_to(stderr, "\n");
    reasoning_open_ = false;
  }

  const bool show_reasoning_;
  bool reasoning_open_ = false;  // reasoning on stderr not yet ended by a newline
  bool content_printed_ = false;
  bool content_ends_line_ = true;
};

// What `k3ctl chat` and `k3ctl complete` were asked, from their flags.
struct ClientFlags {
  GatewayOptions gateway;
  ChatOptions chat;
  bool verbose = false;
  // complete only:
  bool show_reasoning = false;
  bool raw = false;
  std::string prompt = "-";
};

// "" for a reply with an answer; else why it has none: max_tokens was
// reached (finish_reason length) while the model was still thinking, or
// before it wrote anything.
std::string no_answer_note(const ChatReply& reply) {
  if (!reply.has_done || reply.done.finish_reason() != "length") return "";
  if (!reply.content.empty() || !reply.tool_calls.empty()) return "";
  return reply.reasoning.empty() ? "max tokens reached before any answer"
                                 : "max tokens reached while thinking; no answer";
}

// What one chat turn ended with.
enum class TurnEnd { kReply, kCancelled, kFailed };

// One turn of the conversation: sends it (ending with the user's new
// message), prints the reply as it streams and counts it in `stats`. On a
// completed reply *reply holds it; a failure is explained on stderr.
TurnEnd chat_turn(const ClientFlags& flags, v1::Gateway::Stub& stub, SigintRouter& sigint,
                  const Conversation& conversation, ChatStats& stats, ChatReply* reply) {
  const v1::ChatRequest request = conversation.request(flags.chat);
  grpc::ClientContext ctx;
  prepare_context(flags.gateway, &ctx);
  ChatPrinter printer(::isatty(STDOUT_FILENO) == 1);
  sigint.begin_call(&ctx);
  const Clock::time_point start = Clock::now();
  const grpc::Status status = stream_chat(stub, &ctx, request, printer, reply);
  const double seconds = std::chrono::duration<double>(Clock::now() - start).count();
  const bool cancelled = sigint.end_call();
  printer.finish();
  if (status.ok()) {
    const std::optional<Clock::time_point> first = printer.first_piece();
    stats.add(*reply, first ? std::chrono::duration<double>(*first - start).count() : -1.0,
              seconds);
    if (flags.verbose) std::fprintf(stderr, "%s\n", usage_line(*reply).c_str());
    if (const std::string why = no_answer_note(*reply); !why.empty())
      std::fprintf(stderr, "[%s: raise --max-tokens]\n", why.c_str());
    return TurnEnd::kReply;
  }
  if (cancelled) {
    stats.add_cancelled();
    std::fputs("[cancelled]\n", stderr);
    return TurnEnd::kCancelled;
  }
  print_error(explain_call_failure(stub, flags.gateway, status, kStartCheckSeconds));
  return TurnEnd::kFailed;
}

// A bracketed note on stdout ("[history cleared]").
void note(const std::string& text) {
  std::fprintf(stdout, "[%s]\n", text.c_str());
  std::fflush(stdout);
}

// The banner: which model, where, how to get help.
std::string banner(const ClientFlags& flags, const v1::ModelInfo& model,
                   const Conversation& conversation) {
  return cat("k3ctl chat with ", model.id(), " (context ", model.max_context(), " tokens) at ",
             flags.gateway.address, flags.gateway.tls_ca.empty() ? "" : " over TLS", ", thinking ",
             conversation.think_mode(),
             "\nType a message; /help lists the commands; Ctrl-D or /quit exits.\n");
}

// Which model the conversation talks to; an error when --model names one the
// gateway does not serve. Without --model: the first listed (the gateway
// lists its one model under each --served-model-name, the first the main).
StatusOr<v1::ModelInfo> pick_model(const ClientFlags& flags, const v1::ListModelsResponse& models) {
  std::string ids;
  for (const v1::ModelInfo& m : models.models()) {
    if (m.id() == flags.chat.model) return m;
    ids += cat(ids.empty() ? "" : ", ", m.id());
  }
  if (models.models_size() == 0)
    return absl::FailedPreconditionError(
        cat("the gateway at ", flags.gateway.address, " serves no model"));
  if (flags.chat.model.empty()) return models.models(0);
  return absl::NotFoundError(
      cat("the gateway serves ", ids, ", not --model '", flags.chat.model, "'"));
}

// Runs one local command; false when the chat should end.
bool run_local_command(const ChatCommand& command, Conversation& conversation,
                       const ChatStats& stats) {
  using K = ChatCommand::Kind;
  switch (command.kind) {
    case K::kHelp:
      std::fputs(chat_help_text().c_str(), stdout);
      break;
    case K::kReset:
      conversation.clear();
      note("history cleared");
      break;
    case K::kSystem:
      if (std::string bad = check_utf8(command.text); !bad.empty()) {
        print_error(bad);
        break;
      }
      conversation.set_system(command.text);
      note(command.text.empty() ? "system message removed" : "system message set");
      break;
    case K::kThink:
      if (Status s = conversation.set_think(command.text); !s.ok()) {
        print_error(msg(s));
        break;
      }
      note(cat("thinking ", conversation.think_mode()));
      break;
    case K::kSave:
      if (Status s = conversation.save(command.text); !s.ok()) {
        print_error(cat("/save: ", msg(s)));
        break;
      }
      note(cat("saved ", conversation.messages().size(), " messages to ", command.text));
      break;
    case K::kLoad:
      if (Status s = conversation.load(command.text); !s.ok()) {
        print_error(cat("/load: ", msg(s)));
        break;
      }
      note(cat("loaded ", conversation.messages().size(), " messages from ", command.text,
               ", thinking ", conversation.think_mode()));
      break;
    case K::kStats:
      std::fputs(stats.text().c_str(), stdout);
      break;
    case K::kError:
      print_error(command.text);
      break;
    case K::kQuit:
      return false;
    case K::kMessage:
    case K::kEmpty:
      break;
  }
  std::fflush(stdout);
  return true;
}

// The interactive loop; returns the exit code.
int run_chat(const ClientFlags& flags) {
  // Before the channel: gRPC's threads must inherit the blocked SIGINT.
  StatusOr<std::unique_ptr<SigintRouter>> sigint = SigintRouter::start();
  if (!sigint.ok()) {
    print_error(msg(sigint.status()));
    return 1;
  }
  std::unique_ptr<v1::Gateway::Stub> stub = connect_gateway(flags.gateway);
  // The gateway is checked once, at start: a wrong address fails here, not
  // at the first message.
  StatusOr<v1::ListModelsResponse> models =
      check_gateway(*stub, flags.gateway,
                    flags.gateway.timeout_s > 0 ? flags.gateway.timeout_s : kStartCheckSeconds);
  if (!models.ok()) {
    print_error(msg(models.status()));
    return 1;
  }
  StatusOr<v1::ModelInfo> model = pick_model(flags, *models);
  if (!model.ok()) {
    print_error(msg(model.status()));
    return 1;
  }
  Conversation conversation(flags.chat);
  ChatStats stats;
  const bool terminal = ::isatty(STDIN_FILENO) == 1;
  std::unique_ptr<ChatInput> input;
  if (terminal) {
    // libedit turns the UTF-8 it is given into wide characters by the locale.
    if (std::setlocale(LC_CTYPE, "") == nullptr) std::setlocale(LC_CTYPE, "C.UTF-8");
    StatusOr<std::unique_ptr<LineEditor>> editor =
        LineEditor::open(STDIN_FILENO, (*sigint)->interrupt_fd(), default_history_path());
    if (!editor.ok()) {
      print_error(msg(editor.status()));
      return 1;
    }
    input = std::move(*editor);
  } else {
    input = std::make_unique<PipeInput>(STDIN_FILENO, (*sigint)->interrupt_fd());
  }
  std::fputs(banner(flags, *model, conversation).c_str(), terminal ? stdout : stderr);
  std::fflush(terminal ? stdout : stderr);
  for (;;) {
    std::string entry;
    const ChatInput::Result got = input->read(&entry);
    if (got == ChatInput::Result::kEof) {
      if (terminal) std::fputc('\n', stdout);
      return 0;
    }
    if (got == ChatInput::Result::kInterrupted) return kInterruptedExit;
    const ChatCommand command = parse_chat_command(entry);
    if (command.kind == ChatCommand::Kind::kEmpty) continue;
    input->remember(entry);
    if (command.kind != ChatCommand::Kind::kMessage) {
      if (!run_local_command(command, conversation, stats)) return 0;
      continue;
    }
    if (std::string bad = check_utf8(command.text); !bad.empty()) {
      print_error(bad);
      continue;
    }
    conversation.add(make_message("user", command.text));
    ChatReply reply;
    if (chat_turn(flags, *stub, **sigint, conversation, stats, &reply) == TurnEnd::kReply)
      conversation.add(reply.as_message());
    else
      conversation.drop_last();  // a failed or cancelled exchange leaves no trace
  }
}

// `k3ctl complete`; returns the exit code.
int run_complete(const ClientFlags& flags) {
  if (flags.raw && (!flags.chat.system.empty() || !flags.chat.thinking ||
                    !flags.chat.effort.empty() || flags.show_reasoning)) {
    print_error(
        "--raw sends plain text: --system, --no-thinking, --thinking-effort and "
        "--show-reasoning do not apply");
    return kUsageError;
  }
  std::string prompt = flags.prompt;
  if (prompt == "-")
    prompt.assign(std::istreambuf_iterator<char>(std::cin), std::istreambuf_iterator<char>());
  if (std::string bad = check_utf8(prompt); !bad.empty()) {
    print_error(bad);
    return 1;
  }
  std::unique_ptr<v1::Gateway::Stub> stub = connect_gateway(flags.gateway);
  grpc::ClientContext ctx;
  prepare_context(flags.gateway, &ctx);
  CompletePrinter printer(flags.show_reasoning);
  ChatReply reply;
  grpc::Status status;
  if (flags.raw) {
    v1::CompleteRequest request;
    request.set_model(flags.chat.model);
    request.set_prompt(prompt);
    request.set_max_tokens(flags.chat.max_tokens);
    if (flags.chat.has_temperature)
      request.mutable_sampling()->set_temperature(flags.chat.temperature);
    status = stream_complete(*stub, &ctx, request, printer, &reply);
  } else {
    const v1::ChatRequest request =
        make_chat_request(flags.chat, {make_message("user", std::move(prompt))});
    status = stream_chat(*stub, &ctx, request, printer, &reply);
  }
  // No answer: no empty line on stdout either.
  printer.finish(status.ok() && no_answer_note(reply).empty());
  if (!status.ok()) {
    print_error(explain_call_failure(*stub, flags.gateway, status, kStartCheckSeconds));
    return 1;
  }
  if (flags.verbose) std::fprintf(stderr, "%s\n", usage_line(reply).c_str());
  if (const std::string why = no_answer_note(reply); !why.empty()) {
    print_error(cat(why, flags.raw ? ": raise --max-tokens"
                                   : ": raise --max-tokens, or lower the effort "
                                     "(--thinking-effort low, --no-thinking)"));
    return 1;
  }
  return 0;
}

void add_client_flags(CLI::App* cmd, ClientFlags& flags) {
  add_gateway_flags(cmd, flags.gateway);
  add_chat_flags(cmd, flags.chat);
  cmd->add_flag("--verbose,-v", flags.verbose, "print each reply's token usage to stderr");
}

void add_chat_command(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto* cmd = app.add_subcommand(
      "chat",
      "talk with the model through the gateway's gRPC API (line editing, history, /help; "
      "Ctrl-C stops a reply)");
  add_client_flags(cmd, *flags);
  cmd->callback([flags] {
    if (std::string bad = check_effort(flags->chat.effort); !bad.empty()) {
      print_error(bad);
      return set_exit_code(kUsageError);
    }
    set_exit_code(run_chat(*flags));
  });
}

void add_complete_command(CLI::App& app) {
  auto flags = std::make_shared<ClientFlags>();
  auto* cmd = app.add_subcommand(
      "complete",
      "send one prompt through the gateway and stream the answer to stdout (exit 1, saying why on "
      "stderr, when the call fails or max tokens ran out before any answer)");
  add_client_flags(cmd, *flags);
  cmd->add_flag("--show-reasoning", flags->show_reasoning, "stream the reasoning to stderr");
  cmd->add_flag("--raw", flags->raw, "raw text completion (the Complete RPC; no chat format)");
  cmd->add_option("prompt", flags->prompt, "the prompt (absent or '-': all of stdin)");
  cmd->callback([flags] {
    if (std::string bad = check_effort(flags->chat.effort); !bad.empty()) {
      print_error(bad);
      return set_exit_code(kUsageError);
    }
    set_exit_code(run_complete(*flags));
  });
}

const CommandRegistrar kChat(add_chat_command);
const CommandRegistrar kComplete(add_complete_command);

}  // namespace
}  // namespace k3::tools
