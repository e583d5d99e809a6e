// Ctrl-C and line input for an interactive client (k3ctl chat): SIGINT while
// a call streams cancels that call; SIGINT at the prompt ends the input.
#pragma once

#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "shared/status.h"

namespace k3::tools {

// Takes SIGINT away from the default handler: a thread waits for it with
// sigwait (no signal handler, so nothing runs in signal context). While a call
// is registered with begin_call, SIGINT cancels it (ClientContext::TryCancel);
// otherwise it makes interrupt_fd() readable. Thread-safe.
class SigintRouter {
 public:
  // Blocks SIGINT in the calling thread and starts the waiting thread. Call it
  // before any other thread exists (before the first gRPC channel), so that
  // every later thread inherits the blocked mask.
  static StatusOr<std::unique_ptr<SigintRouter>> start();
  ~SigintRouter();
  SigintRouter(const SigintRouter&) = delete;
  SigintRouter& operator=(const SigintRouter&) = delete;

  // SIGINT cancels `ctx` until end_call(); `ctx` must outlive that.
  void begin_call(grpc::ClientContext* ctx);
  // Unregisters the call; true when SIGINT cancelled it.
  bool end_call();
  // Readable once SIGINT arrived while no call was registered.
  int interrupt_fd() const { return pipe_read_; }

 private:
  SigintRouter() = default;
  void wait_loop();

  std::mutex mu_;
  grpc::ClientContext* call_ = nullptr;  // guarded by mu_
  bool cancelled_ = false;               // guarded by mu_
  bool stopping_ = false;                // guarded by mu_
  int pipe_read_ = -1;
  int pipe_write_ = -1;
  std::thread thread_;
};

// Reads lines from a file descriptor, giving up when `interrupt_fd` becomes
// readable. Not thread-safe.
class LineReader {
 public:
  enum class Result { kLine, kEof, kInterrupted };

  LineReader(int fd, int interrupt_fd) : fd_(fd), interrupt_fd_(interrupt_fd) {}
  // The next line without its '\n' (a last line without one counts too).
  Result read_line(std::string* line);

 private:
  int fd_;
  int interrupt_fd_;
  std::string buffer_;  // read but not yet returned
  bool eof_ = false;
};

}  // namespace k3::tools
