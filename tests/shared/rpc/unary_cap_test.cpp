// A unary method's own receive cap (shared/rpc/unary_cap.h), on a real
// server: a request over it is refused RESOURCE_EXHAUSTED (naming method and
// cap) without reaching the handler, one under it is answered, the other
// methods keep their handlers; a method that does not fit is refused.
#include "shared/rpc/unary_cap.h"

#include <gtest/gtest.h>

#include <atomic>
#include <string>

#include "k3serve/v1/expert.grpc.pb.h"
#include "shared/rpc/server.h"
#include "tests/test_util.h"

namespace k3::rpc {
namespace {

namespace pb = k3serve::v1;

TEST(UnaryCap, RefusesOverTheCapBeforeTheHandler) {
  testing::TempDir tmp;
  pb::RemoteExpertService::Service service;
  std::atomic<int> handled{0};
  ASSERT_TRUE((cap_unary<pb::DescribeRequest, pb::DescribeResponse>(
                   &service, "k3serve.v1.RemoteExpertService.Describe", 1000,
                   [&](const pb::DescribeRequest&, pb::DescribeResponse* out) {
                     ++handled;
                     out->set_model_fingerprint("feedface");
                     return grpc::Status::OK;
                   }))
                  .ok());
  auto server = start_server("unix:" + tmp.file("cap.sock"), {&service});
  ASSERT_TRUE(server.ok()) << server.status();
  auto stub = pb::RemoteExpertService::NewStub(
      grpc::CreateChannel(server->address, grpc::InsecureChannelCredentials()));
  auto call = [&](size_t filler, pb::DescribeResponse* out) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    pb::DescribeRequest req;
    if (filler > 0)
      req.GetReflection()->MutableUnknownFields(&req)->AddLengthDelimited(15,
                                                                          std::string(filler, 'x'));
    return stub->Describe(&ctx, req, out);
  };
  pb::DescribeResponse out;
  grpc::Status s = call(0, &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(out.model_fingerprint(), "feedface");
  s = call(900, &out);  // 903 bytes on the wire: under the cap
  EXPECT_TRUE(s.ok()) << s.error_message();
  s = call(2000, &out);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  EXPECT_EQ(s.error_message(),
            "k3serve.v1.RemoteExpertService.Describe: a request of 2003 bytes is over this "
            "method's cap of 1000 bytes");
  EXPECT_EQ(handled.load(), 2);
  // Stats keeps the service's own (unimplemented) handler.
  grpc::ClientContext ctx;
  pb::StatsResponse st;
  EXPECT_EQ(stub->Stats(&ctx, pb::StatsRequest(), &st).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  server->server->Shutdown();
}

TEST(UnaryCap, RefusesAMethodThatDoesNotFit) {
  pb::RemoteExpertService::Service service;
  auto ok = [](const auto&, auto*) { return grpc::Status::OK; };
  Status s = cap_unary<pb::DescribeRequest, pb::DescribeResponse>(
      &service, "k3serve.v1.RemoteExpertService.Nothing", 10, ok);
  EXPECT_EQ(msg(s), "no gRPC method k3serve.v1.RemoteExpertService.Nothing");
  s = cap_unary<pb::ExpertStreamRequest, pb::ExpertStreamReply>(
      &service, "k3serve.v1.RemoteExpertService.Experts", 10, ok);
  EXPECT_EQ(msg(s), "k3serve.v1.RemoteExpertService.Experts is not unary");
  s = cap_unary<pb::StatsRequest, pb::StatsResponse>(
      &service, "k3serve.v1.RemoteExpertService.Describe", 10, ok);
  EXPECT_NE(msg(s).find("takes k3serve.v1.DescribeRequest"), std::string::npos) << s;
}

}  // namespace
}  // namespace k3::rpc
