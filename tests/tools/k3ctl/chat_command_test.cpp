// k3ctl chat as a real process against a fake Gateway service
// (client_fixture.h): the history it sends, its commands, progress, errors,
// SIGINT, TLS, and its check of the gateway at start.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/test_util.h"
#include "tests/tools/k3ctl/client_fixture.h"

namespace k3::k3ctl_test {
namespace {

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

TEST_F(K3ctlClientTest, ChatQuitsOnSlashQuitAndOnEof) {
  K3ctlProcess quit({"chat", "--gateway", server_.address});
  quit.write_stdin("/quit\nnot sent\n");
  EXPECT_EQ(quit.finish(), 0) << quit.err();
  K3ctlProcess eof({"chat", "--gateway", server_.address});
  EXPECT_EQ(eof.finish(), 0) << eof.err();
  EXPECT_TRUE(gateway_.chats().empty());
}

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

}  // namespace
}  // namespace k3::k3ctl_test
