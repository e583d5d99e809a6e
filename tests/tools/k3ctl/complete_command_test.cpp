// k3ctl complete (and what every client command shares: usage errors, the
// API key as bearer metadata, --raw) as a real process against a fake
// Gateway service (client_fixture.h).
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "tests/test_util.h"
#include "tests/tools/k3ctl/client_fixture.h"

namespace k3::k3ctl_test {
namespace {

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
}  // namespace k3::k3ctl_test
