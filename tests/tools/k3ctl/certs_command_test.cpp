// k3ctl certs as a real process, its files used for a real mutual-TLS gRPC
// handshake on loopback: the right CA and client certificate connect; no
// client certificate, or another CA, is refused.
#include <sys/stat.h>

#include <gtest/gtest.h>

#include <chrono>

#include <grpcpp/grpcpp.h>

#include "k3serve/v1/expert.grpc.pb.h"
#include "shared/rpc/server.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

using testing::TempDir;
namespace v1 = k3serve::v1;

class HealthOnly final : public v1::ExpertService::Service {
  grpc::Status Health(grpc::ServerContext*, const v1::HealthRequest*,
                      v1::HealthResponse* out) override {
    rpc::fill_health("expertd", out);
    return grpc::Status::OK;
  }
};

std::string make_certs(const TempDir& tmp, const std::string& name) {
  const std::string dir = tmp.file(name);
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "certs", "--out", dir, "--hosts",
                                 "storage1.example,10.1.2.3"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return dir;
}

grpc::Status health(const std::string& address, const grpc::SslCredentialsOptions& o) {
  auto ch = grpc::CreateChannel(address, grpc::SslCredentials(o));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  v1::HealthRequest req;
  v1::HealthResponse resp;
  return v1::ExpertService::NewStub(ch)->Health(&ctx, req, &resp);
}

TEST(Certs, MutualTlsWithTheMadeCertificates) {
  TempDir tmp;
  const std::string d = make_certs(tmp, "pki"), other = make_certs(tmp, "other");
  struct stat st;
  ASSERT_EQ(::stat((d + "/server.key").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0600u);

  grpc::SslServerCredentialsOptions so(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  so.pem_root_certs = testing::read_file(d + "/ca.pem");
  so.pem_key_cert_pairs.push_back(
      {testing::read_file(d + "/server.key"), testing::read_file(d + "/server.pem")});
  HealthOnly svc;
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(so), &port);
  b.RegisterService(&svc);
  auto server = b.BuildAndStart();
  ASSERT_NE(server, nullptr);
  const std::string addr = "localhost:" + std::to_string(port);

  grpc::SslCredentialsOptions good;
  good.pem_root_certs = testing::read_file(d + "/ca.pem");
  good.pem_private_key = testing::read_file(d + "/client.key");
  good.pem_cert_chain = testing::read_file(d + "/client.pem");
  EXPECT_TRUE(health(addr, good).ok()) << health(addr, good).error_message();

  grpc::SslCredentialsOptions no_client_cert;
  no_client_cert.pem_root_certs = good.pem_root_certs;
  EXPECT_EQ(health(addr, no_client_cert).error_code(), grpc::StatusCode::UNAVAILABLE);

  grpc::SslCredentialsOptions wrong_ca = good;  // trusts another CA: the server is refused
  wrong_ca.pem_root_certs = testing::read_file(other + "/ca.pem");
  EXPECT_EQ(health(addr, wrong_ca).error_code(), grpc::StatusCode::UNAVAILABLE);

  grpc::SslCredentialsOptions foreign_client = good;  // a client certificate of another CA
  foreign_client.pem_private_key = testing::read_file(other + "/client.key");
  foreign_client.pem_cert_chain = testing::read_file(other + "/client.pem");
  EXPECT_EQ(health(addr, foreign_client).error_code(), grpc::StatusCode::UNAVAILABLE);
  server->Shutdown();
}

TEST(Certs, RefusesToOverwriteAndBadHosts) {
  TempDir tmp;
  const std::string d = make_certs(tmp, "pki");
  const std::string ca = testing::read_file(d + "/ca.pem");
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "certs", "--out", d});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("exists; --force makes new ones"), std::string::npos) << r.err;
  EXPECT_EQ(testing::read_file(d + "/ca.pem"), ca);
  r = testing::run_command(
      {testing::bin_dir() + "/k3ctl", "certs", "--out", tmp.file("x"), "--hosts", "a b"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("is not a host name or address"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace k3
