// k3ctl chat (an interactive terminal client) and k3ctl complete (one request,
// for scripts): clients of the gateway's public gRPC API.
#include <unistd.h>

#include <cstdio>
#include <iostream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "tools/k3ctl/commands.h"
#include "tools/k3ctl/gateway_client.h"
#include "tools/k3ctl/interactive_input.h"

namespace k3::k3ctl {
namespace {

namespace v1 = k3serve::v1;

constexpr int kUsageError = 2;
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

// A chat reply on the terminal: the reasoning dimmed (or, when stdout is not a
// terminal, between "<think>" and "</think>" lines), then the content, then
// the tool calls. Not thread-safe.
class ChatPrinter : public ReplySink {
 public:
  explicit ChatPrinter(bool tty) : tty_(tty) {}

  void on_reasoning(std::string_view text) override {
    if (!in_reasoning_) {
      write(tty_ ? kDim : "<think>\n");
      in_reasoning_ = true;
    }
    write(text);
    std::fflush(stdout);
  }
  void on_content(std::string_view text) override {
    end_reasoning();
    write(text);
    std::fflush(stdout);
  }
  void on_tool_call(const v1::ToolCall& call) override {
    end_reasoning();
    end_line();
    write(tool_call_text(call));
    std::fflush(stdout);
  }
  // Closes the reply (also a cancelled or failed one) on a line of its own.
  void finish() {
    end_reasoning();
    end_line();
    std::fflush(stdout);
  }

 private:
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
  bool in_reasoning_ = false;
  bool at_line_start_ = true;
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

std::string trim(const std::string& s) {
  const size_t b = s.find_first_not_of(" \t\r\n");
  if (b == std::string::npos) return "";
  const size_t e = s.find_last_not_of(" \t\r\n");
  return s.substr(b, e - b + 1);
}

// One turn of the conversation: sends history (ending with the user's new
// message), prints the reply as it streams. Returns the reply when it
// completed; nullopt (after saying why on stderr) when it failed or SIGINT
// cancelled it.
std::optional<ChatReply> chat_turn(const ClientFlags& flags, v1::Gateway::Stub& stub,
                                   SigintRouter& sigint,
                                   const std::vector<v1::ChatMessage>& history) {
  const v1::ChatRequest request = make_chat_request(flags.chat, history);
  grpc::ClientContext ctx;
  prepare_context(flags.gateway, &ctx);
  ChatPrinter printer(::isatty(STDOUT_FILENO) == 1);
  ChatReply reply;
  sigint.begin_call(&ctx);
  const grpc::Status status = stream_chat(stub, &ctx, request, printer, &reply);
  const bool cancelled = sigint.end_call();
  printer.finish();
  if (status.ok()) {
    if (flags.verbose) std::fprintf(stderr, "%s\n", usage_line(reply).c_str());
    return reply;
  }
  if (cancelled)
    std::fputs("[cancelled]\n", stderr);
  else
    print_error(describe_error(status));
  return std::nullopt;
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
  const bool prompt = ::isatty(STDIN_FILENO) == 1;
  LineReader input(STDIN_FILENO, (*sigint)->interrupt_fd());
  std::vector<v1::ChatMessage> history;  // the system message is added per request
  for (;;) {
    if (prompt) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    std::string line;
    const LineReader::Result got = input.read_line(&line);
    if (got != LineReader::Result::kLine) {
      if (prompt) std::fputc('\n', stdout);
      return got == LineReader::Result::kEof ? 0 : kInterruptedExit;
    }
    const std::string command = trim(line);
    if (command.empty()) continue;
    if (command == "/quit") return 0;
    if (command == "/reset") {
      history.clear();
      std::fputs("[history cleared]\n", stdout);
      std::fflush(stdout);
      continue;
    }
    if (command == "/help") {
      std::fputs("/reset clears the conversation, /quit (or EOF) exits; Ctrl-C stops a reply\n",
                 stdout);
      continue;
    }
    if (std::string bad = check_utf8(line); !bad.empty()) {
      print_error(bad);
      continue;
    }
    history.push_back(make_message("user", line));
    std::optional<ChatReply> reply = chat_turn(flags, *stub, **sigint, history);
    if (reply)
      history.push_back(reply->as_message());
    else
      history.pop_back();  // a failed or cancelled exchange leaves no trace
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
  printer.finish(status.ok());
  if (!status.ok()) {
    print_error(describe_error(status));
    return 1;
  }
  if (flags.verbose) std::fprintf(stderr, "%s\n", usage_line(reply).c_str());
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
      "chat", "talk with the model through the gateway (/reset, /quit; Ctrl-C stops a reply)");
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
      "complete", "send one prompt through the gateway and stream the answer to stdout");
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
}  // namespace k3::k3ctl
