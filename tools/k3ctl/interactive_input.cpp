#include "tools/k3ctl/interactive_input.h"

#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <utility>

namespace k3::tools {

StatusOr<std::unique_ptr<SigintRouter>> SigintRouter::start() {
  std::unique_ptr<SigintRouter> r(new SigintRouter());
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return absl::InternalError(cat("pipe: ", std::strerror(errno)));
  r->pipe_read_ = fds[0];
  r->pipe_write_ = fds[1];
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  if (int e = pthread_sigmask(SIG_BLOCK, &set, nullptr); e != 0)
    return absl::InternalError(cat("pthread_sigmask: ", std::strerror(e)));
  // A shell starts background jobs with SIGINT ignored; sigwait must still see it.
  ::signal(SIGINT, SIG_DFL);
  r->thread_ = std::thread(&SigintRouter::wait_loop, r.get());
  return r;
}

SigintRouter::~SigintRouter() {
  if (thread_.joinable()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stopping_ = true;
    }
    // A thread-directed SIGINT wakes the sigwait; stopping_ makes it return.
    pthread_kill(thread_.native_handle(), SIGINT);
    thread_.join();
  }
  if (pipe_read_ >= 0) ::close(pipe_read_);
  if (pipe_write_ >= 0) ::close(pipe_write_);
}

void SigintRouter::wait_loop() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  for (;;) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    if (call_ != nullptr) {
      cancelled_ = true;
      call_->TryCancel();
    } else {
      const char byte = 1;
      [[maybe_unused]] ssize_t n = ::write(pipe_write_, &byte, 1);
    }
  }
}

void SigintRouter::begin_call(grpc::ClientContext* ctx) {
  std::lock_guard<std::mutex> lock(mu_);
  call_ = ctx;
  cancelled_ = false;
}

bool SigintRouter::end_call() {
  std::lock_guard<std::mutex> lock(mu_);
  call_ = nullptr;
  return std::exchange(cancelled_, false);
}

LineReader::Result LineReader::read_line(std::string* line) {
  for (;;) {
    if (size_t nl = buffer_.find('\n'); nl != std::string::npos) {
      line->assign(buffer_, 0, nl);
      buffer_.erase(0, nl + 1);
      return Result::kLine;
    }
    if (eof_) {
      if (buffer_.empty()) return Result::kEof;
      line->swap(buffer_);
      buffer_.clear();
      return Result::kLine;
    }
    pollfd fds[2] = {{fd_, POLLIN, 0}, {interrupt_fd_, POLLIN, 0}};
    const nfds_t nfds = interrupt_fd_ >= 0 ? 2 : 1;
    if (::poll(fds, nfds, -1) < 0) {
      if (errno == EINTR) continue;
      eof_ = true;
      continue;
    }
    if (nfds == 2 && (fds[1].revents & POLLIN)) return Result::kInterrupted;
    if (fds[0].revents == 0) continue;
    char buf[4096];
    const ssize_t n = ::read(fd_, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      eof_ = true;
      continue;
    }
    buffer_.append(buf, static_cast<size_t>(n));
  }
}

}  // namespace k3::tools
