// The k3ctl client suites' fixture: k3ctl chat / complete as real processes
// (K3ctlProcess) against a fake Gateway service (FakeGateway: a real gRPC
// server on loopback in the test process that records what it is sent and
// streams scripted replies), and a port that answers like an HTTP server
// (FakeHttpPort).
#pragma once

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <condition_variable>
#include <cstring>
#include <functional>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

#include "k3serve/v1/gateway.grpc.pb.h"
#include "shared/rpc/server.h"
#include "tests/test_util.h"

extern char** environ;

namespace k3::k3ctl_test {

namespace v1 = k3serve::v1;
using Clock = std::chrono::steady_clock;

// Generous: the suite shares two cores with other builds and tests.
constexpr double kWaitSeconds = 120;

inline v1::ChatEvent delta(const std::string& reasoning, const std::string& content) {
  v1::ChatEvent e;
  e.mutable_delta()->set_reasoning_content(reasoning);
  e.mutable_delta()->set_content(content);
  return e;
}

inline v1::ChatEvent done(const std::string& finish_reason = "stop") {
  v1::ChatEvent e;
  e.mutable_done()->set_finish_reason(finish_reason);
  e.mutable_done()->mutable_usage()->set_prompt_tokens(11);
  e.mutable_done()->mutable_usage()->set_completion_tokens(5);
  e.mutable_done()->mutable_usage()->set_total_tokens(16);
  e.mutable_done()->set_id("req-1");
  return e;
}

// A Gateway that records every Chat and Complete request (with its
// authorization metadata) and answers Chat with `chat_script`. Thread-safe.
class FakeGateway final : public v1::Gateway::Service {
 public:
  using ChatScript = std::function<grpc::Status(int call, grpc::ServerContext*,
                                                grpc::ServerWriter<v1::ChatEvent>*)>;

  void set_chat_script(ChatScript script) {
    std::lock_guard<std::mutex> lock(mu_);
    chat_script_ = std::move(script);
  }

  grpc::Status Chat(grpc::ServerContext* ctx, const v1::ChatRequest* req,
                    grpc::ServerWriter<v1::ChatEvent>* writer) override {
    ChatScript script;
    int call = 0;
    {
      std::lock_guard<std::mutex> lock(mu_);
      call = static_cast<int>(chats_.size());
      chats_.push_back(*req);
      authorizations_.push_back(authorization(*ctx));
      script = chat_script_;
    }
    return script(call, ctx, writer);
  }

  // One model, as the real gateway lists it: k3ctl chat asks at start.
  grpc::Status ListModels(grpc::ServerContext*, const v1::ListModelsRequest*,
                          v1::ListModelsResponse* out) override {
    v1::ModelInfo* m = out->add_models();
    m->set_id("fake-model");
    m->set_max_context(4096);
    return grpc::Status::OK;
  }

  grpc::Status Complete(grpc::ServerContext* ctx, const v1::CompleteRequest* req,
                        grpc::ServerWriter<v1::CompleteEvent>* writer) override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      completes_.push_back(*req);
      authorizations_.push_back(authorization(*ctx));
    }
    for (const char* piece : {"raw ", "text"}) {
      v1::CompleteEvent e;
      e.set_text(piece);
      writer->Write(e);
    }
    v1::CompleteEvent e;
    *e.mutable_done() = done().done();
    writer->Write(e);
    return grpc::Status::OK;
  }

  // Streams "slow start" and then waits (bounded) for the client to cancel.
  // Returns CANCELLED once it saw the cancellation.
  grpc::Status stream_until_cancelled(grpc::ServerContext* ctx,
                                      grpc::ServerWriter<v1::ChatEvent>* writer) {
    writer->Write(delta("", "slow start"));
    const auto deadline = Clock::now() + std::chrono::duration<double>(kWaitSeconds);
    while (!ctx->IsCancelled() && Clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    if (!ctx->IsCancelled()) return grpc::Status(grpc::StatusCode::INTERNAL, "never cancelled");
    {
      std::lock_guard<std::mutex> lock(mu_);
      ++cancellations_;
    }
    cv_.notify_all();
    return grpc::Status::CANCELLED;
  }

  bool wait_cancellations(int n, double seconds) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, std::chrono::duration<double>(seconds),
                        [&] { return cancellations_ >= n; });
  }

  std::vector<v1::ChatRequest> chats() {
    std::lock_guard<std::mutex> lock(mu_);
    return chats_;
  }
  std::vector<v1::CompleteRequest> completes() {
    std::lock_guard<std::mutex> lock(mu_);
    return completes_;
  }
  std::vector<std::string> authorizations() {
    std::lock_guard<std::mutex> lock(mu_);
    return authorizations_;
  }

 private:
  static std::string authorization(const grpc::ServerContext& ctx) {
    auto it = ctx.client_metadata().find("authorization");
    if (it == ctx.client_metadata().end()) return "";
    return std::string(it->second.data(), it->second.size());
  }

  std::mutex mu_;
  std::condition_variable cv_;
  ChatScript chat_script_;
  std::vector<v1::ChatRequest> chats_;
  std::vector<v1::CompleteRequest> completes_;
  std::vector<std::string> authorizations_;
  int cancellations_ = 0;
};

// k3ctl as a child process with its stdin, stdout and stderr on pipes.
class K3ctlProcess {
 public:
  // Runs `k3ctl args...`; `env` entries ("NAME=value") are added to this
  // process's environment, from which K3_API_KEY is removed.
  K3ctlProcess(const std::vector<std::string>& args, const std::vector<std::string>& env = {}) {
    std::vector<std::string> argv = {testing::bin_dir() + "/k3ctl"};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<std::string> envs;
    for (char** e = environ; *e != nullptr; ++e)
      if (std::strncmp(*e, "K3_API_KEY=", 11) != 0) envs.push_back(*e);
    envs.insert(envs.end(), env.begin(), env.end());
    // Everything the child needs is built before fork (only async-signal-safe
    // calls between fork and exec: this process has gRPC threads).
    std::vector<char*> c_argv, c_env;
    for (auto& s : argv) c_argv.push_back(s.data());
    c_argv.push_back(nullptr);
    for (auto& s : envs) c_env.push_back(s.data());
    c_env.push_back(nullptr);
    int in[2], out[2], err[2];
    if (::pipe2(in, O_CLOEXEC) != 0 || ::pipe2(out, O_CLOEXEC) != 0 || ::pipe2(err, O_CLOEXEC) != 0)
      throw std::runtime_error("pipe2 failed");
    pid_ = ::fork();
    if (pid_ == 0) {
      ::dup2(in[0], 0);
      ::dup2(out[1], 1);
      ::dup2(err[1], 2);
      ::signal(SIGINT, SIG_DFL);
      sigset_t none;
      sigemptyset(&none);
      ::sigprocmask(SIG_SETMASK, &none, nullptr);
      ::execve(c_argv[0], c_argv.data(), c_env.data());
      ::_exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    ::close(err[1]);
    stdin_ = in[1];
    stdout_ = out[0];
    stderr_ = err[0];
  }

  ~K3ctlProcess() {
    close_stdin();
    if (status_ < 0) {
      ::kill(pid_, SIGKILL);
      ::waitpid(pid_, nullptr, 0);
    }
    if (stdout_ >= 0) ::close(stdout_);
    if (stderr_ >= 0) ::close(stderr_);
  }

  void write_stdin(const std::string& text) {
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n = ::write(stdin_, text.data() + done, text.size() - done);
      if (n <= 0) return;  // the child exited; its exit code tells
      done += static_cast<size_t>(n);
    }
  }
  void close_stdin() {
    if (stdin_ >= 0) ::close(stdin_);
    stdin_ = -1;
  }
  void signal(int sig) { ::kill(pid_, sig); }

  // Reads output until `what` appears in stdout (or stderr); false on timeout.
  bool wait_stdout(const std::string& what, double seconds = kWaitSeconds) {
    return wait_until([&] { return out_.find(what) != std::string::npos; }, seconds);
  }
  bool wait_stderr(const std::string& what, double seconds = kWaitSeconds) {
    return wait_until([&] { return err_.find(what) != std::string::npos; }, seconds);
  }

  // Closes stdin, reads all output and waits for the exit; the exit code
  // (128+signal when killed), -1 on timeout.
  int finish(double seconds = kWaitSeconds) {
    close_stdin();
    return wait_exit(seconds);
  }
  // Reads all output and waits for the exit, stdin left open.
  int wait_exit(double seconds = kWaitSeconds) {
    wait_until([&] { return stdout_ < 0 && stderr_ < 0; }, seconds);
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    while (status_ < 0 && Clock::now() < deadline) {
      int st = 0;
      if (::waitpid(pid_, &st, WNOHANG) == pid_)
        status_ = st;
      else
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    if (status_ < 0) return -1;
    if (WIFEXITED(status_)) return WEXITSTATUS(status_);
    return 128 + WTERMSIG(status_);
  }

  const std::string& out() const { return out_; }
  const std::string& err() const { return err_; }

 private:
  bool wait_until(const std::function<bool()>& ready, double seconds) {
    const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
    while (!ready()) {
      if (Clock::now() >= deadline || (stdout_ < 0 && stderr_ < 0)) return ready();
      pump(50);
    }
    return true;
  }

  // Appends whatever the child wrote within `ms` to out_ / err_.
  void pump(int ms) {
    pollfd fds[2] = {{stdout_, POLLIN, 0}, {stderr_, POLLIN, 0}};
    if (::poll(fds, 2, ms) <= 0) return;
    read_some(fds[0], &stdout_, &out_);
    read_some(fds[1], &stderr_, &err_);
  }
  static void read_some(const pollfd& p, int* fd, std::string* into) {
    if (*fd < 0 || p.revents == 0) return;
    char buf[4096];
    const ssize_t n = ::read(*fd, buf, sizeof buf);
    if (n > 0) {
      into->append(buf, static_cast<size_t>(n));
    } else if (n == 0 || errno != EINTR) {
      ::close(*fd);
      *fd = -1;
    }
  }

  int pid_ = -1;
  int status_ = -1;
  int stdin_ = -1, stdout_ = -1, stderr_ = -1;
  std::string out_, err_;
};

class K3ctlClientTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ::signal(SIGPIPE, SIG_IGN);  // writing to a k3ctl that already exited
    // By default: a reasoning delta, two content deltas, done.
    gateway_.set_chat_script([](int, grpc::ServerContext*, grpc::ServerWriter<v1::ChatEvent>* w) {
      w->Write(delta("let me think", ""));
      w->Write(delta("", "Hello"));
      w->Write(delta("", ", world"));
      w->Write(done());
      return grpc::Status::OK;
    });
    auto server = rpc::start_server("127.0.0.1:0", {&gateway_});
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = std::move(*server);
  }
  void TearDown() override {
    if (server_.server)
      server_.server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  }

  // Runs `k3ctl cmd --gateway ADDR args...` with `stdin_text` to its exit.
  struct Result {
    int exit_code;
    std::string out, err;
  };
  Result run(const std::string& cmd, const std::vector<std::string>& args,
             const std::string& stdin_text = "", const std::vector<std::string>& env = {}) {
    std::vector<std::string> a = {cmd, "--gateway", server_.address};
    a.insert(a.end(), args.begin(), args.end());
    K3ctlProcess p(a, env);
    p.write_stdin(stdin_text);
    const int code = p.finish();
    return {code, p.out(), p.err()};
  }

  FakeGateway gateway_;
  rpc::RunningServer server_;
};

// A loopback TCP port that answers every connection like an HTTP/1.1 server
// (what the gateway's OpenAI port does with a request it does not know).
class FakeHttpPort {
 public:
  FakeHttpPort() {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof a;
    if (::bind(fd_, reinterpret_cast<sockaddr*>(&a), len) != 0 || ::listen(fd_, 8) != 0 ||
        ::getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len) != 0)
      return;
    address_ = cat("127.0.0.1:", ntohs(a.sin_port));
    thread_ = std::thread([this] {
      for (;;) {
        const int c = ::accept4(fd_, nullptr, nullptr, SOCK_CLOEXEC);
        if (c < 0) return;  // shutdown() below
        char buf[1024];
        [[maybe_unused]] ssize_t n = ::read(c, buf, sizeof buf);
        static constexpr char kReply[] =
            "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
        [[maybe_unused]] ssize_t w = ::write(c, kReply, sizeof kReply - 1);
        ::close(c);
      }
    });
  }
  ~FakeHttpPort() {
    ::shutdown(fd_, SHUT_RDWR);
    if (thread_.joinable()) thread_.join();
    ::close(fd_);
  }
  const std::string& address() const { return address_; }

 private:
  int fd_ = -1;
  std::string address_;
  std::thread thread_;
};

}  // namespace k3::k3ctl_test
