// k3ctl chat / complete as real processes against a fake Gateway service: a
// real gRPC server on loopback in this process that records what it is sent
// and streams scripted replies.
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

namespace k3 {
namespace {

namespace v1 = k3serve::v1;
using Clock = std::chrono::steady_clock;

// Generous: the suite shares two cores with other builds and tests.
constexpr double kWaitSeconds = 120;

v1::ChatEvent delta(const std::string& reasoning, const std::string& content) {
  v1::ChatEvent e;
  e.mutable_delta()->set_reasoning_content(reasoning);
  e.mutable_delta()->set_content(content);
  return e;
}

v1::ChatEvent done(const std::string& finish_reason = "stop") {
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

TEST_F(K3ctlClientTest, CompleteStreamsTheContentAndExitsZero) {
  const Result r = run("complete", {"say hi"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Hello, world\n");
  EXPECT_EQ(r.err.find("let me think"), std::string::npos) << r.err;
  const auto chats = gateway_.chats();
  ASSERT_EQ(chats.size(), 1u);
  ASSERT_EQ(chats[0].messages_size(), 1);
  EXPECT_EQ(chats[0].messages(0).role(), "user");
  EXPECT_EQ(chats[0].messages(0).content(), "say hi");
  EXPECT_FALSE(chats[0].has_enable_thinking());
  EXPECT_FALSE(chats[0].has_sampling());
  EXPECT_EQ(chats[0].model(), "");
}

TEST_F(K3ctlClientTest, CompleteReadsStdinShowsReasoningAndSendsTheOptions) {
  const Result r = run("complete",
                       {"--show-reasoning", "--no-thinking", "--temperature", "0", "--max-tokens",
                        "7", "--model", "k3", "--system", "be brief", "--verbose"},
                       "from stdin\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "Hello, world\n");
  EXPECT_NE(r.err.find("let me think\n"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("usage: prompt 11, completion 5"), std::string::npos) << r.err;
  const auto chats = gateway_.chats();
  ASSERT_EQ(chats.size(), 1u);
  const v1::ChatRequest& req = chats[0];
  ASSERT_EQ(req.messages_size(), 2);
  EXPECT_EQ(req.messages(0).role(), "system");
  EXPECT_EQ(req.messages(0).content(), "be brief");
  EXPECT_EQ(req.messages(1).role(), "user");
  EXPECT_EQ(req.messages(1).content(), "from stdin\n");
  ASSERT_TRUE(req.has_enable_thinking());
  EXPECT_FALSE(req.enable_thinking());
  ASSERT_TRUE(req.sampling().has_temperature());
  EXPECT_EQ(req.sampling().temperature(), 0.0f);
  EXPECT_EQ(req.max_tokens(), 7u);
  EXPECT_EQ(req.model(), "k3");
}

TEST_F(K3ctlClientTest, CompleteErrorStatusExitsOneWithTheMessage) {
  gateway_.set_chat_script([](int, grpc::ServerContext*, grpc::ServerWriter<v1::ChatEvent>*) {
    return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED, "admission queue full");
  });
  const Result r = run("complete", {"hi"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("error: RESOURCE_EXHAUSTED: admission queue full"), std::string::npos)
      << r.err;
}

TEST_F(K3ctlClientTest, CompleteAgainstNoGatewayExitsOne) {
  // A port nothing listens on: this fixture's server, shut down.
  const std::string address = server_.address;
  server_.server->Shutdown();
  server_.server.reset();
  K3ctlProcess p({"complete", "--gateway", address, "--timeout", "60", "hi"});
  EXPECT_EQ(p.finish(), 1);
  // Explained as chat explains it at start.
  EXPECT_NE(p.err().find("nothing is listening at " + address), std::string::npos) << p.err();
  EXPECT_EQ(p.out(), "");
}

// A reply that max_tokens cut while thinking has no answer: said on stderr,
// exit 1, no empty line on stdout; with an answer, even cut, exit 0.
TEST_F(K3ctlClientTest, CompleteCutOffWhileThinkingSaysSoAndExitsOne) {
  gateway_.set_chat_script([](int, grpc::ServerContext*, grpc::ServerWriter<v1::ChatEvent>* w) {
    w->Write(delta("let me think about", ""));
    w->Write(done("length"));
    return grpc::Status::OK;
  });
  const Result r = run("complete", {"--max-tokens", "20", "hi"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_EQ(r.out, "");
  EXPECT_NE(r.err.find("max tokens reached while thinking; no answer"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("raise --max-tokens"), std::string::npos) << r.err;

  gateway_.set_chat_script([](int, grpc::ServerContext*, grpc::ServerWriter<v1::ChatEvent>* w) {
    w->Write(delta("thought", ""));
    w->Write(delta("", "Partial ans"));
    w->Write(done("length"));
    return grpc::Status::OK;
  });
  const Result cut = run("complete", {"hi"});
  EXPECT_EQ(cut.exit_code, 0) << cut.err;
  EXPECT_EQ(cut.out, "Partial ans\n");
  EXPECT_EQ(cut.err.find("max tokens"), std::string::npos) << cut.err;

  // Stopped normally with empty content (the model chose to say nothing).
  gateway_.set_chat_script([](int, grpc::ServerContext*, grpc::ServerWriter<v1::ChatEvent>* w) {
    w->Write(delta("thought", ""));
    w->Write(done("stop"));
    return grpc::Status::OK;
  });
  const Result empty = run("complete", {"hi"});
  EXPECT_EQ(empty.exit_code, 0) << empty.err;
  EXPECT_EQ(empty.out, "\n");
}

TEST_F(K3ctlClientTest, ChatSaysWhenAReplyWasCutOffWhileThinking) {
  gateway_.set_chat_script([](int, grpc::ServerContext*, grpc::ServerWriter<v1::ChatEvent>* w) {
    w->Write(delta("pondering", ""));
    w->Write(done("length"));
    return grpc::Status::OK;
  });
  const Result r = run("chat", {}, "hello\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("[max tokens reached while thinking; no answer: raise --max-tokens]"),
            std::string::npos)
      << r.err;
}

TEST_F(K3ctlClientTest, TheApiKeyArrivesAsBearerMetadata) {
  EXPECT_EQ(run("complete", {"a"}, "", {"K3_API_KEY=from-env"}).exit_code, 0);
  EXPECT_EQ(run("complete", {"--api-key", "from-flag", "b"}, "", {"K3_API_KEY=from-env"}).exit_code,
            0);
  EXPECT_EQ(run("complete", {"c"}).exit_code, 0);
  EXPECT_EQ(gateway_.authorizations(),
            (std::vector<std::string>{"Bearer from-env", "Bearer from-flag", ""}));
}

TEST_F(K3ctlClientTest, RawUsesTheCompleteRpc) {
  const Result r = run("complete", {"--raw", "--max-tokens", "3", "once upon"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "raw text\n");
  const auto completes = gateway_.completes();
  ASSERT_EQ(completes.size(), 1u);
  EXPECT_EQ(completes[0].prompt(), "once upon");
  EXPECT_EQ(completes[0].max_tokens(), 3u);
  EXPECT_TRUE(gateway_.chats().empty());
}

TEST_F(K3ctlClientTest, UsageErrorsExitTwo) {
  const Result effort = run("complete", {"--thinking-effort", "extreme", "hi"});
  EXPECT_EQ(effort.exit_code, 2);
  EXPECT_NE(effort.err.find("--thinking-effort"), std::string::npos) << effort.err;
  const Result raw = run("complete", {"--raw", "--system", "s", "hi"});
  EXPECT_EQ(raw.exit_code, 2);
  EXPECT_NE(raw.err.find("--raw"), std::string::npos) << raw.err;
  EXPECT_TRUE(gateway_.chats().empty());
  EXPECT_TRUE(gateway_.completes().empty());
}

TEST_F(K3ctlClientTest, ChatSendsTheHistoryAndResetClearsIt) {
  gateway_.set_chat_script(
      [](int call, grpc::ServerContext*, grpc::ServerWriter<v1::ChatEvent>* w) {
        w->Write(delta(cat("reasoning ", call), ""));
        w->Write(delta("", cat("answer ", call)));
        w->Write(done());
        return grpc::Status::OK;
      });
  const Result r = run("chat", {"--system", "sys", "--thinking-effort", "high"},
                       "hello\nhow are you\n/reset\nagain\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("<think>\nreasoning 0\n</think>\nanswer 0\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("answer 1\n"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[history cleared]"), std::string::npos) << r.out;
  const auto chats = gateway_.chats();
  ASSERT_EQ(chats.size(), 3u);
  EXPECT_EQ(chats[0].thinking_effort(), "high");

  const v1::ChatRequest& second = chats[1];
  ASSERT_EQ(second.messages_size(), 4);
  EXPECT_EQ(second.messages(0).role(), "system");
  EXPECT_EQ(second.messages(0).content(), "sys");
  EXPECT_EQ(second.messages(1).role(), "user");
  EXPECT_EQ(second.messages(1).content(), "hello");
  EXPECT_EQ(second.messages(2).role(), "assistant");
  EXPECT_EQ(second.messages(2).content(), "answer 0");
  EXPECT_EQ(second.messages(2).reasoning_content(), "reasoning 0");
  EXPECT_EQ(second.messages(3).role(), "user");
  EXPECT_EQ(second.messages(3).content(), "how are you");

  const v1::ChatRequest& after_reset = chats[2];
  ASSERT_EQ(after_reset.messages_size(), 2);
  EXPECT_EQ(after_reset.messages(0).content(), "sys");
  EXPECT_EQ(after_reset.messages(1).content(), "again");
}

TEST_F(K3ctlClientTest, ChatErrorIsReportedAndTheChatContinues) {
  gateway_.set_chat_script(
      [](int call, grpc::ServerContext*, grpc::ServerWriter<v1::ChatEvent>* w) {
        if (call == 0) return grpc::Status(grpc::StatusCode::OUT_OF_RANGE, "prompt too long");
        w->Write(delta("", "fine"));
        w->Write(done());
        return grpc::Status::OK;
      });
  const Result r = run("chat", {}, "too long\nshort\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("error: OUT_OF_RANGE: prompt too long"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("fine\n"), std::string::npos) << r.out;
  const auto chats = gateway_.chats();
  ASSERT_EQ(chats.size(), 2u);
  ASSERT_EQ(chats[1].messages_size(), 1);  // the failed exchange is not history
  EXPECT_EQ(chats[1].messages(0).content(), "short");
}

v1::ChatEvent progress(uint32_t queued, uint32_t done, uint32_t total, double eta_s) {
  v1::ChatEvent e;
  e.mutable_progress()->set_queued(queued);
  e.mutable_progress()->set_done(done);
  e.mutable_progress()->set_total(total);
  e.mutable_progress()->set_eta_s(eta_s);
  return e;
}

// Off a terminal the progress goes to stderr, a line per new text, and stops
// at the first text; stdout carries the reply alone. (On a terminal it is one
// line rewritten in place: tests/e2e/realspeed_test.sh reads it in tmux.)
TEST_F(K3ctlClientTest, ChatShowsTheProgressBeforeTheReplyOnStderrOffATerminal) {
  gateway_.set_chat_script([](int, grpc::ServerContext*, grpc::ServerWriter<v1::ChatEvent>* w) {
    w->Write(progress(3, 0, 0, -1));
    w->Write(progress(3, 0, 0, -1));  // the same again (every 5 s): not repeated
    w->Write(progress(1, 0, 0, -1));
    w->Write(progress(0, 0, 0, -1));  // admitted, before engined's first report
    w->Write(progress(0, 0, 3000, -1));
    w->Write(progress(0, 1024, 3000, 65));
    w->Write(progress(0, 3000, 3000, 0));
    w->Write(delta("", "Hello"));
    w->Write(progress(0, 3000, 3000, 0));  // after the text: not shown
    w->Write(done());
    return grpc::Status::OK;
  });
  const Result r = run("chat", {}, "hi\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("[waiting in line (2 ahead)]\n"
                       "[waiting in line (next)]\n"
                       "[starting]\n"
                       "[reading your prompt: 0 of 3,000 tokens]\n"
                       "[reading your prompt: 1,024 of 3,000 tokens, about 1 min left]\n"
                       "[reading your prompt: 3,000 of 3,000 tokens]\n"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(r.err.find("waiting in line (2 ahead)", r.err.find("(2 ahead)") + 1), std::string::npos)
      << r.err;
  EXPECT_EQ(r.out.find("reading your prompt"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Hello\n"), std::string::npos) << r.out;
}

TEST_F(K3ctlClientTest, SigintCancelsTheStreamingReplyOnlyAndSigintAtThePromptExits) {
  gateway_.set_chat_script(
      [this](int call, grpc::ServerContext* ctx, grpc::ServerWriter<v1::ChatEvent>* w) {
        if (call == 0) return gateway_.stream_until_cancelled(ctx, w);
        w->Write(delta("", cat("answer ", call)));
        w->Write(done());
        return grpc::Status::OK;
      });
  K3ctlProcess p({"chat", "--gateway", server_.address, "--verbose"});
  p.write_stdin("first\n");
  ASSERT_TRUE(p.wait_stdout("slow start")) << p.out() << p.err();
  p.signal(SIGINT);
  EXPECT_TRUE(gateway_.wait_cancellations(1, kWaitSeconds));
  ASSERT_TRUE(p.wait_stderr("[cancelled]")) << p.err();

  p.write_stdin("second\n");
  ASSERT_TRUE(p.wait_stdout("answer 1\n")) << p.out() << p.err();
  // The usage line comes after the call ended: k3ctl is back at the prompt.
  ASSERT_TRUE(p.wait_stderr("usage: prompt 11")) << p.err();
  const auto chats = gateway_.chats();
  ASSERT_EQ(chats.size(), 2u);
  ASSERT_EQ(chats[1].messages_size(), 1);  // the cancelled exchange was dropped
  EXPECT_EQ(chats[1].messages(0).content(), "second");

  p.signal(SIGINT);  // stdin stays open: the exit is SIGINT's doing, not EOF's
  EXPECT_EQ(p.wait_exit(), 130) << p.err();
}

TEST_F(K3ctlClientTest, ChatQuitsOnSlashQuitAndOnEof) {
  K3ctlProcess quit({"chat", "--gateway", server_.address});
  quit.write_stdin("/quit\nnot sent\n");
  EXPECT_EQ(quit.finish(), 0) << quit.err();
  K3ctlProcess eof({"chat", "--gateway", server_.address});
  EXPECT_EQ(eof.finish(), 0) << eof.err();
  EXPECT_TRUE(gateway_.chats().empty());
}

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

TEST_F(K3ctlClientTest, ChatChecksTheGatewayAtStartAndNamesTheModel) {
  const Result r = run("chat", {}, "");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("k3ctl chat with fake-model (context 4096 tokens)"), std::string::npos)
      << r.err;
  const Result wrong = run("chat", {"--model", "other"}, "hello\n");
  EXPECT_EQ(wrong.exit_code, 1);
  EXPECT_NE(wrong.err.find("serves fake-model, not --model 'other'"), std::string::npos)
      << wrong.err;
  EXPECT_TRUE(gateway_.chats().empty());
}

TEST_F(K3ctlClientTest, ChatAtStartTellsAnHttpPortFromNothingListening) {
  FakeHttpPort http;
  ASSERT_FALSE(http.address().empty());
  K3ctlProcess on_http({"chat", "--gateway", http.address()});
  on_http.write_stdin("hello\n");
  EXPECT_EQ(on_http.finish(), 1);
  EXPECT_NE(on_http.err().find(http.address() + " is an HTTP port"), std::string::npos)
      << on_http.err();
  EXPECT_NE(on_http.err().find("use the gRPC address"), std::string::npos) << on_http.err();

  const std::string address = server_.address;
  server_.server->Shutdown();
  server_.server.reset();
  K3ctlProcess nothing({"chat", "--gateway", address});
  nothing.write_stdin("hello\n");
  EXPECT_EQ(nothing.finish(), 1);
  EXPECT_NE(nothing.err().find("nothing is listening at " + address), std::string::npos)
      << nothing.err();
  K3ctlProcess no_socket({"chat", "--gateway", "unix:/nonexistent/k3serve.sock"});
  EXPECT_EQ(no_socket.finish(), 1);
  EXPECT_NE(no_socket.err().find("nothing is listening at unix:/nonexistent/k3serve.sock"),
            std::string::npos)
      << no_socket.err();
}

TEST_F(K3ctlClientTest, ChatCommandsStayLocalAndSaveLoadRoundTrips) {
  const std::string dir = ::testing::TempDir();
  const std::string file = dir + "/k3ctl-chat-" + std::to_string(::getpid()) + ".json";
  const Result r = run("chat", {},
                       "/frobnicate\n\"\"\"\nline one\nline two\"\"\"\n/save " + file +
                           "\n/reset\n/think off\n/load " + file + "\n/stats\nafter load\n");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.err.find("unknown command /frobnicate"), std::string::npos) << r.err;
  EXPECT_NE(r.out.find("[saved 2 messages to " + file + "]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("[loaded 2 messages from " + file + ", thinking max]"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("session: replies 1 (cancelled 0), prompt 11 tokens, completion 5"),
            std::string::npos)
      << r.out;
  const auto chats = gateway_.chats();
  ASSERT_EQ(chats.size(), 2u);  // /frobnicate never reached the gateway
  ASSERT_EQ(chats[0].messages_size(), 1);
  EXPECT_EQ(chats[0].messages(0).content(), "line one\nline two");
  ASSERT_EQ(chats[1].messages_size(), 3);
  EXPECT_EQ(chats[1].messages(1).content(), "Hello, world");
  EXPECT_EQ(chats[1].messages(1).reasoning_content(), "let me think");
  EXPECT_EQ(chats[1].messages(2).content(), "after load");
  EXPECT_FALSE(chats[1].has_enable_thinking());  // /load brought thinking back on
  ::unlink(file.c_str());
}

TEST_F(K3ctlClientTest, ChatSpeaksTlsWithTlsCaAndSaysWhenOneSideLacksIt) {
  const std::string dir = ::testing::TempDir() + "/k3ctl-chat-tls-" + std::to_string(::getpid());
  const testing::CommandResult certs =
      testing::run_command({testing::bin_dir() + "/k3ctl", "certs", "--out", dir, "--force"});
  ASSERT_EQ(certs.exit_code, 0) << certs.err;
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back(
      {testing::read_file(dir + "/server.key"), testing::read_file(dir + "/server.pem")});
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(ssl), &port);
  builder.RegisterService(&gateway_);
  std::unique_ptr<grpc::Server> tls_server = builder.BuildAndStart();
  ASSERT_TRUE(tls_server != nullptr && port != 0);
  const std::string address = cat("127.0.0.1:", port);

  K3ctlProcess tls({"chat", "--gateway", address, "--tls-ca", dir + "/ca.pem"});
  tls.write_stdin("over tls\n");
  EXPECT_EQ(tls.finish(), 0) << tls.err();
  EXPECT_NE(tls.err().find("over TLS"), std::string::npos) << tls.err();
  EXPECT_NE(tls.out().find("Hello, world"), std::string::npos) << tls.out();

  K3ctlProcess clear({"chat", "--gateway", address});
  EXPECT_EQ(clear.finish(), 1);
  EXPECT_NE(clear.err().find("give --tls-ca"), std::string::npos) << clear.err();

  K3ctlProcess only_client({"chat", "--gateway", server_.address, "--tls-ca", dir + "/ca.pem"});
  EXPECT_EQ(only_client.finish(), 1);
  EXPECT_NE(only_client.err().find("drop --tls-ca"), std::string::npos) << only_client.err();

  K3ctlProcess missing({"chat", "--gateway", address, "--tls-ca", dir + "/absent.pem"});
  EXPECT_EQ(missing.finish(), 105) << missing.err();  // CLI11's validation error
  EXPECT_NE(missing.err().find("--tls-ca"), std::string::npos) << missing.err();
  ASSERT_EQ(gateway_.chats().size(), 1u);
  EXPECT_EQ(gateway_.chats()[0].messages(0).content(), "over tls");
  tls_server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
}

// complete and bench serve pointed at the HTTP port explain it as chat does.
TEST_F(K3ctlClientTest, CompleteAndBenchServeTellAnHttpPort) {
  FakeHttpPort http;
  ASSERT_FALSE(http.address().empty());
  K3ctlProcess complete({"complete", "--gateway", http.address(), "hi"});
  EXPECT_EQ(complete.finish(), 1);
  EXPECT_NE(complete.err().find(http.address() + " is an HTTP port"), std::string::npos)
      << complete.err();
  EXPECT_NE(complete.err().find("use the gRPC address"), std::string::npos) << complete.err();
  EXPECT_EQ(complete.out(), "");

  K3ctlProcess bench(
      {"bench", "serve", "--gateway", http.address(), "--clients", "1", "--requests", "1"});
  EXPECT_EQ(bench.finish(), 1);
  EXPECT_NE(bench.err().find(http.address() + " is an HTTP port"), std::string::npos)
      << bench.err();
  EXPECT_EQ(bench.out(), "") << "no figures from a run that never reached the gateway";
}

}  // namespace
}  // namespace k3
