// The token gate (shared/rpc/token_gate.h): its check, and a real server on
// plaintext credentials refusing a call without the token on its metadata
// before reading its message - a request over gRPC's receive cap is refused
// UNAUTHENTICATED, where a check in the handler would see gRPC refuse it
// RESOURCE_EXHAUSTED first. (With TLS: tests/expertd/remote_listener_memory_test.)
#include "shared/rpc/token_gate.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "k3serve/v1/expert.grpc.pb.h"
#include "shared/rpc/server.h"
#include "tests/test_util.h"

namespace k3::rpc {
namespace {

namespace pb = k3serve::v1;

TEST(TokenGate, ChecksTheBearerTokenAndLetsOpenMethodsThrough) {
  TokenGate g = bearer_token_gate("s3cret-token");
  g.open_methods = {"/k3serve.v1.RemoteExpertService/Health"};
  std::vector<std::pair<std::string, bool>> refused;
  g.on_refused = [&](std::string_view m, bool had) { refused.emplace_back(std::string(m), had); };
  EXPECT_TRUE(g.check("/k3serve.v1.RemoteExpertService/Describe", "Bearer s3cret-token").ok());
  EXPECT_TRUE(g.check("/k3serve.v1.RemoteExpertService/Health", std::nullopt).ok());
  const grpc::Status none = g.check("/k3serve.v1.RemoteExpertService/Describe", std::nullopt);
  EXPECT_EQ(none.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(none.error_message(), "no auth token");
  for (const char* v : {"Bearer s3cret-token2", "Bearer s3cret-toke", "s3cret-token", "Bearer ",
                        "bearer s3cret-token", ""}) {
    const grpc::Status s = g.check("/x/Y", v);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << v;
    EXPECT_EQ(s.error_message(), "a wrong auth token") << v;
  }
  ASSERT_EQ(refused.size(), 7u);
  EXPECT_EQ(refused[0],
            std::make_pair(std::string("/k3serve.v1.RemoteExpertService/Describe"), false));
  EXPECT_EQ(refused[1], std::make_pair(std::string("/x/Y"), true));
}

// A call of Describe carrying `bytes` of unknown-field filler.
grpc::Status describe(const std::string& address, const std::string& token, size_t bytes) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  auto stub = pb::RemoteExpertService::NewStub(
      grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (!token.empty()) ctx.AddMetadata(kAuthMetadataKey, bearer(token));
  pb::DescribeRequest req;
  if (bytes > 0)
    req.GetReflection()->MutableUnknownFields(&req)->AddLengthDelimited(15,
                                                                        std::string(bytes, 'x'));
  pb::DescribeResponse out;
  return stub->Describe(&ctx, req, &out);
}

TEST(TokenGate, APlaintextServerRefusesBeforeReadingTheMessage) {
  testing::TempDir tmp;
  pb::RemoteExpertService::Service service;  // every method UNIMPLEMENTED
  ServerOptions o;
  auto gate = std::make_shared<TokenGate>(bearer_token_gate("s3cret-token"));
  int refusals = 0;
  gate->on_refused = [&](std::string_view, bool) { ++refusals; };
  o.gate = gate;
  for (const std::string listen : {"unix:" + tmp.file("gate.sock"), std::string("127.0.0.1:0")}) {
    auto server = start_server(listen, {&service}, o);
    ASSERT_TRUE(server.ok()) << server.status();
    const std::string& a = server->address;
    const size_t over = 6u << 20;  // gRPC's default receive cap is 4 MB
    for (const char* token : {"", "wrong-token"}) {
      grpc::Status s = describe(a, token, over);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << listen << " " << token;
      s = describe(a, token, 0);
      EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED) << listen << " " << token;
    }
    // The token lets the call through to gRPC's cap and to the handler.
    EXPECT_EQ(describe(a, "s3cret-token", over).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
    EXPECT_EQ(describe(a, "s3cret-token", 0).error_code(), grpc::StatusCode::UNIMPLEMENTED);
    server->server->Shutdown();
  }
  EXPECT_EQ(refusals, 8);
}

}  // namespace
}  // namespace k3::rpc
