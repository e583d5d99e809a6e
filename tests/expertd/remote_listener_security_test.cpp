// Security of the remote listener, with real certificates (k3ctl certs) and
// real processes: TLS with the shared token works bit-identically; a wrong
// token, a server certificate of another CA, plaintext against TLS and a
// client without a certificate under mutual TLS are refused with a clear
// status (and a log line), and nothing is computed for them.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <cstring>

#include "shared/checkpoint/model_config.h"
#include "tests/expertd/remote_harness.h"

namespace k3 {
namespace {

using testing::TempDir;
using namespace expertd_test;

std::string make_certs(const TempDir& tmp, const std::string& name) {
  const std::string dir = tmp.file(name);
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "certs", "--out", dir});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return dir;
}

std::string token_file(const TempDir& tmp, const std::string& name, const std::string& token) {
  const std::string p = tmp.file(name);
  testing::write_file(p, token + "\n");
  ::chmod(p.c_str(), 0600);
  return p;
}

std::vector<int32_t> ids8() {
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  return prompt(8, static_cast<int32_t>(c->vocab_size));
}

engined::ExpertSourceOptions tls_client(const std::string& address, const std::string& ca,
                                        const std::string& token, const std::string& cert = "",
                                        const std::string& key = "") {
  engined::ExpertSourceOptions xo;
  engined::RemoteHost h;
  h.name = "secure";
  h.address = address;
  h.tls.ca = ca;
  h.tls.cert = cert;
  h.tls.key = key;
  h.token_file = token;
  xo.remote_hosts.push_back(h);
  xo.remote_deadline_ms = 3000;
  return xo;
}

TEST(RemoteSecurity, TlsAndTokenServeBitIdenticalAndRefuseTheRest) {
  TempDir tmp;
  const std::string certs = make_certs(tmp, "certs");
  const std::string other = make_certs(tmp, "other-ca");
  const std::string tok = token_file(tmp, "token", "s3cret-token-1");
  const std::string bad = token_file(tmp, "bad", "s3cret-token-2");
  RemoteExpertd h(tmp, "rtls",
                  {"--tls-cert", certs + "/server.pem", "--tls-key", certs + "/server.key",
                   "--auth-token-file", tok},
                  testing::tiny_model_dir());
  ASSERT_TRUE(h.wait_ready()) << h.log();
  EXPECT_FALSE(h.describe().insecure_remote());
  const auto ids = ids8();
  const auto want = score_standalone(ids);
  Status st;
  auto got = score_with(tls_client(h.address, certs + "/ca.pem", tok), ids, &st);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
  const uint64_t served = h.stats().remote_requests();
  EXPECT_GT(served, 0u);

  // The wrong token: UNAUTHENTICATED, logged by the host.
  score_with(tls_client(h.address, certs + "/ca.pem", bad), ids, &st);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnauthenticated) << st;
  EXPECT_NE(msg(st).find("wrong auth token"), std::string::npos) << st;
  EXPECT_NE(msg(st).find("secure ("), std::string::npos) << st;
  EXPECT_NE(h.log().find("refused Describe before reading it"), std::string::npos) << h.log();

  // A CA that did not sign the host's certificate: the client refuses it.
  score_with(tls_client(h.address, other + "/ca.pem", tok), ids, &st);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_NE(msg(st).find("secure ("), std::string::npos) << st;

  // Plaintext against TLS, through the engined binary: exit 1, the host
  // named on stderr (the log line).
  auto r = testing::run_command({testing::bin_dir() + "/engined", "score", "--model",
                                 testing::tiny_model_dir(), "--ids", "1,2,3", "--out",
                                 tmp.file("plain.f32"), "--remote-expertd", "plain=" + h.address,
                                 "--insecure-remote", "--remote-deadline-ms", "3000"});
  EXPECT_EQ(r.exit_code, 1) << r.err;
  EXPECT_NE(r.err.find("remote expertd plain (" + h.address + ") is unavailable"),
            std::string::npos)
      << r.err;
  EXPECT_EQ(h.stats().remote_requests(), served);  // nothing computed for them
}

TEST(RemoteSecurity, MutualTlsRefusesAClientWithoutCertificate) {
  TempDir tmp;
  const std::string certs = make_certs(tmp, "certs");
  const std::string tok = token_file(tmp, "token", "mtls-token");
  RemoteExpertd h(tmp, "rmtls",
                  {"--tls-cert", certs + "/server.pem", "--tls-key", certs + "/server.key",
                   "--tls-ca", certs + "/ca.pem", "--auth-token-file", tok},
                  testing::tiny_model_dir());
  ASSERT_TRUE(h.wait_ready()) << h.log();
  const auto ids = ids8();
  Status st;
  score_with(tls_client(h.address, certs + "/ca.pem", tok), ids, &st);
  EXPECT_EQ(st.code(), absl::StatusCode::kUnavailable) << st;
  EXPECT_EQ(h.stats().remote_requests(), 0u);
  const auto want = score_standalone(ids);
  const auto got = score_with(
      tls_client(h.address, certs + "/ca.pem", tok, certs + "/client.pem", certs + "/client.key"),
      ids, &st);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(std::memcmp(got.data(), want.data(), got.size() * 4), 0);
}

TEST(RemoteSecurity, ExpertdRefusesAnUnprotectedListener) {
  TempDir tmp;
  for (const auto& flags : std::vector<std::vector<std::string>>{
           {"--remote-listen", "127.0.0.1:0"},
           {"--remote-listen", "127.0.0.1:0", "--tls-cert", "x.pem"},
           {"--tls-cert", "x.pem"},
           {"--insecure-remote"}}) {
    std::vector<std::string> argv = {
        testing::bin_dir() + "/expertd", "--model",   testing::tiny_model_dir(), "--listen",
        "unix:" + tmp.file("x.sock"),    "--segment", unique_segment("rrefuse")};
    argv.insert(argv.end(), flags.begin(), flags.end());
    auto r = testing::run_command(argv);
    EXPECT_EQ(r.exit_code, 2) << r.err;
    EXPECT_TRUE(r.err.find("--tls-cert") != std::string::npos ||
                r.err.find("--remote-listen") != std::string::npos)
        << r.err;
  }
}

}  // namespace
}  // namespace k3
