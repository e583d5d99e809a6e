#include "tools/k3ctl/chat_input.h"

#include <fcntl.h>
#include <histedit.h>
#include <poll.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>

namespace k3::tools {

ChatInput::Result PipeInput::read(std::string* entry) {
  for (;;) {
    std::string line;
    switch (lines_.read_line(&line)) {
      case LineReader::Result::kLine:
        if (blocks_.add_line(line, entry)) return Result::kEntry;
        continue;
      case LineReader::Result::kEof:
        return Result::kEof;
      case LineReader::Result::kInterrupted:
        return Result::kInterrupted;
    }
  }
}

std::string default_history_path() {
  const char* state = std::getenv("XDG_STATE_HOME");
  if (state != nullptr && state[0] == '/') return cat(state, "/k3serve/history");
  const char* home = std::getenv("HOME");
  if (home != nullptr && home[0] != '\0') return cat(home, "/.local/state/k3serve/history");
  return "";
}

namespace {

constexpr std::string_view kPasteEnd = "\x1b[201~";
constexpr char kBracketedPasteOn[] = "\x1b[?2004h";
constexpr char kBracketedPasteOff[] = "\x1b[?2004l";
constexpr int kHistorySize = 1000;

// Creates the history file's directory (0700) and the file (0600) and makes
// sure the file is mode 0600 even when it existed. "" or what went wrong.
std::string prepare_history_file(const std::string& path) {
  std::error_code ec;
  const std::filesystem::path dir = std::filesystem::path(path).parent_path();
  if (!dir.empty() && !std::filesystem::exists(dir, ec)) {
    std::filesystem::create_directories(dir, ec);
    if (ec) return cat("cannot create ", dir.string(), ": ", ec.message());
    ::chmod(dir.c_str(), 0700);
  }
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return cat("cannot open ", path, ": ", std::strerror(errno));
  const int rc = ::fchmod(fd, 0600);
  const int err = errno;
  ::close(fd);
  if (rc != 0) return cat("cannot make ", path, " mode 0600: ", std::strerror(err));
  return "";
}

// SIGWINCH: libedit's own handler is off (EL_SIGNAL 0, for Ctrl-C), so a
// handler of ours writes a byte to this pipe and the reader tells libedit
// the new width. One line editor at a time.
std::atomic<int> g_winch_fd{-1};
void on_winch(int) {
  const int fd = g_winch_fd.load();
  if (fd >= 0) {
    const char b = 1;
    [[maybe_unused]] ssize_t r = ::write(fd, &b, 1);
  }
}

// The SIGWINCH pipe and handler, restored on destruction.
class WinchWatch {
 public:
  WinchWatch() {
    if (::pipe2(fds_, O_CLOEXEC | O_NONBLOCK) != 0) {
      fds_[0] = fds_[1] = -1;
      return;
    }
    g_winch_fd.store(fds_[1]);
    struct sigaction sa {};
    sa.sa_handler = &on_winch;
    sa.sa_flags = SA_RESTART;
    sigemptyset(&sa.sa_mask);
    installed_ = ::sigaction(SIGWINCH, &sa, &old_) == 0;
  }
  ~WinchWatch() {
    if (installed_) ::sigaction(SIGWINCH, &old_, nullptr);
    g_winch_fd.store(-1);
    for (int fd : fds_)
      if (fd >= 0) ::close(fd);
  }
  WinchWatch(const WinchWatch&) = delete;
  WinchWatch& operator=(const WinchWatch&) = delete;
  int fd() const { return fds_[0]; }
  // Empties the pipe; whether the window changed since the last call.
  bool drain() const {
    char buf[64];
    bool any = false;
    while (::read(fds_[0], buf, sizeof buf) > 0) any = true;
    return any;
  }

 private:
  int fds_[2] = {-1, -1};
  struct sigaction old_ {};
  bool installed_ = false;
};

}  // namespace

struct LineEditor::Impl {
  int in_fd = -1;
  int interrupt_fd = -1;
  EditLine* el = nullptr;
  History* history = nullptr;
  std::string history_path;
  std::string pending;       // bytes read from in_fd, not yet handed out
  bool interrupted = false;  // Ctrl-C arrived during this read
  bool had_text = false;     // ... while the line held text
  MultilineAssembler blocks;
  WinchWatch winch;

  ~Impl() {
    if (el != nullptr) el_end(el);
    if (history != nullptr) history_end(history);
  }

  // The next byte of input: 1, 0 at EOF, -1 on error or Ctrl-C.
  int next_byte(unsigned char* b) {
    while (pending.empty()) {
      pollfd fds[3] = {{in_fd, POLLIN, 0}, {interrupt_fd, POLLIN, 0}, {winch.fd(), POLLIN, 0}};
      if (::poll(fds, 3, -1) < 0) {  // a negative fd is skipped
        if (errno == EINTR) continue;
        return -1;
      }
      if ((fds[2].revents & POLLIN) && winch.drain()) {
        // The terminal's new size, used from the next redraw on (as
        // libedit's own handler does: a forced redraw here would start at
        // the column where the reflowed cursor now is).
        el_resize(el);
      }
      if (interrupt_fd >= 0 && (fds[1].revents & POLLIN)) {
        char drained;
        [[maybe_unused]] ssize_t r = ::read(interrupt_fd, &drained, 1);
        const LineInfo* li = el_line(el);
        interrupted = true;
        had_text = (li != nullptr && li->lastchar != li->buffer) || blocks.in_block();
        return -1;
      }
      if (fds[0].revents == 0) continue;
      char buf[4096];
      const ssize_t got = ::read(in_fd, buf, sizeof buf);
      if (got < 0 && (errno == EINTR || errno == EAGAIN)) continue;
      if (got <= 0) return got == 0 ? 0 : -1;
      pending.assign(buf, static_cast<size_t>(got));
    }
    *b = static_cast<unsigned char>(pending.front());
    pending.erase(0, 1);
    return 1;
  }

  // One character decoded from UTF-8 (libedit's own reader would go through
  // the locale; ill-formed bytes become U+FFFD).
  int next_char(wchar_t* wc) {
    unsigned char b = 0;
    if (int r = next_byte(&b); r != 1) return r;
    int extra = 0;
    uint32_t cp = b;
    if (b >= 0xf0 && b < 0xf8) {
      extra = 3;
      cp = b & 0x07;
    } else if (b >= 0xe0) {
      extra = 2;
      cp = b & 0x0f;
    } else if (b >= 0xc2 && b < 0xe0) {
      extra = 1;
      cp = b & 0x1f;
    } else if (b >= 0x80) {
      *wc = 0xfffd;
      return 1;
    }
    for (int i = 0; i < extra; ++i) {
      unsigned char c = 0;
      if (int r = next_byte(&c); r != 1) return r;
      if ((c & 0xc0) != 0x80) {
        pending.insert(pending.begin(), static_cast<char>(c));  // the start of the next one
        *wc = 0xfffd;
        return 1;
      }
      cp = (cp << 6) | (c & 0x3f);
    }
    *wc = static_cast<wchar_t>(cp);
    return 1;
  }

  // Bound to the paste-start marker: reads to the end marker and inserts the
  // pasted text (CRs as newlines) into the line as it is.
  unsigned char paste() {
    std::string text;
    for (;;) {
      unsigned char b = 0;
      if (next_byte(&b) != 1) return CC_EOF;  // Ctrl-C or EOF mid-paste
      text += static_cast<char>(b);
      if (text.size() >= kPasteEnd.size() &&
          text.compare(text.size() - kPasteEnd.size(), kPasteEnd.size(), kPasteEnd) == 0) {
        text.resize(text.size() - kPasteEnd.size());
        break;
      }
    }
    std::string clean;
    for (size_t i = 0; i < text.size(); ++i) {
      if (text[i] == '\r') {
        clean += '\n';
        if (i + 1 < text.size() && text[i + 1] == '\n') ++i;
      } else {
        clean += text[i];
      }
    }
    while (!clean.empty() && clean.back() == '\n') clean.pop_back();
    if (!clean.empty() && el_insertstr(el, clean.c_str()) != 0) return CC_ERROR;
    return CC_REFRESH;
  }

  static Impl* of(EditLine* el) {
    void* self = nullptr;
    el_get(el, EL_CLIENTDATA, &self);
    return static_cast<Impl*>(self);
  }
  static int getc_fn(EditLine* el, wchar_t* wc) { return of(el)->next_char(wc); }
  static unsigned char paste_fn(EditLine* el, int) { return of(el)->paste(); }
  static char* prompt_fn(EditLine* el) {
    static char normal[] = "> ";
    static char block[] = "... ";
    return of(el)->blocks.in_block() ? block : normal;
  }

  void save_history() {
    if (history_path.empty()) return;
    HistEvent ev;
    if (::history(history, &ev, H_SAVE, history_path.c_str()) < 0) {
      std::fprintf(stderr, "warning: cannot write the history to %s\n", history_path.c_str());
      history_path.clear();
      return;
    }
    ::chmod(history_path.c_str(), 0600);
  }
};

StatusOr<std::unique_ptr<LineEditor>> LineEditor::open(int in_fd, int interrupt_fd,
                                                       const std::string& history_path) {
  auto impl = std::make_unique<Impl>();
  impl->in_fd = in_fd;
  impl->interrupt_fd = interrupt_fd;
  impl->history = history_init();
  if (impl->history == nullptr) return absl::InternalError("libedit: history_init failed");
  HistEvent ev;
  ::history(impl->history, &ev, H_SETSIZE, kHistorySize);
  ::history(impl->history, &ev, H_SETUNIQUE, 1);
  if (!history_path.empty()) {
    if (std::string problem = prepare_history_file(history_path); !problem.empty()) {
      std::fprintf(stderr, "warning: no history file: %s\n", problem.c_str());
    } else {
      impl->history_path = history_path;
      ::history(impl->history, &ev, H_LOAD, history_path.c_str());  // empty file: -1, fine
    }
  }
  impl->el = el_init("k3ctl", stdin, stdout, stderr);
  if (impl->el == nullptr) return absl::InternalError("libedit: el_init failed");
  EditLine* el = impl->el;
  el_set(el, EL_CLIENTDATA, impl.get());
  el_set(el, EL_EDITOR, "emacs");
  el_set(el, EL_SIGNAL, 0);  // SIGINT is blocked: our getc sees Ctrl-C
  el_set(el, EL_HIST, history, impl->history);
  el_set(el, EL_PROMPT, &Impl::prompt_fn);
  el_set(el, EL_GETCFN, &Impl::getc_fn);
  el_set(el, EL_ADDFN, "k3-paste", "bracketed paste: the pasted text as is", &Impl::paste_fn);
  el_set(el, EL_BIND, "\\e[200~", "k3-paste", nullptr);
  el_set(el, EL_BIND, "^R", "em-inc-search-prev", nullptr);
  return std::unique_ptr<LineEditor>(new LineEditor(std::move(impl)));
}

LineEditor::LineEditor(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
LineEditor::~LineEditor() = default;

ChatInput::Result LineEditor::read(std::string* entry) {
  Impl& m = *impl_;
  for (;;) {
    m.interrupted = false;
    m.had_text = false;
    std::fputs(kBracketedPasteOn, stdout);
    std::fflush(stdout);
    int count = 0;
    const char* line = el_gets(m.el, &count);
    std::fputs(kBracketedPasteOff, stdout);
    std::fflush(stdout);
    if (m.interrupted) {
      const bool drop = m.had_text;
      m.blocks.discard();
      std::fputs("^C\n", stdout);
      if (drop) continue;  // the line being typed is dropped; back at the prompt
      return Result::kInterrupted;
    }
    if (line == nullptr || count <= 0) return Result::kEof;
    std::string text(line, static_cast<size_t>(count));
    if (!text.empty() && text.back() == '\n') text.pop_back();
    if (m.blocks.add_line(text, entry)) return Result::kEntry;
  }
}

void LineEditor::remember(const std::string& entry) {
  HistEvent ev;
  if (entry.empty()) return;
  ::history(impl_->history, &ev, H_ENTER, entry.c_str());
  impl_->save_history();
}

}  // namespace k3::tools
