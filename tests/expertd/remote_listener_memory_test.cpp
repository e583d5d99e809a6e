// The remote listener's memory before authentication, with a real expertd
// process on loopback: two concurrent unauthenticated 400 MB Describe calls
// are refused on their metadata (UNAUTHENTICATED) before their messages are
// read, so expertd's resident memory hardly moves - with TLS and the token,
// and plaintext (--insecure-remote) with the token. An authenticated
// Describe over its few-KB cap is refused RESOURCE_EXHAUSTED, and the
// legitimate calls still answer.
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <future>
#include <string>
#include <thread>

#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>

#include "k3serve/v1/expert.grpc.pb.h"
#include "shared/rpc/credentials.h"
#include "tests/expertd/remote_harness.h"

namespace k3 {
namespace {

using testing::TempDir;
using namespace expertd_test;

constexpr size_t kBig = 400u << 20;
constexpr const char* kDescribe = "/k3serve.v1.RemoteExpertService/Describe";

// A /proc/PID/status field in kB ("VmRSS", "VmHWM"); -1 when missing.
long status_kb(int pid, const std::string& field) {
  std::ifstream f("/proc/" + std::to_string(pid) + "/status");
  std::string line;
  while (std::getline(f, line))
    if (line.rfind(field + ":", 0) == 0) return std::stol(line.substr(field.size() + 1));
  return -1;
}

// Resets the process's peak RSS (VmHWM) to its current RSS.
void reset_peak(int pid) {
  std::ofstream("/proc/" + std::to_string(pid) + "/clear_refs") << "5";
}

std::string make_certs(const TempDir& tmp) {
  const std::string dir = tmp.file("certs");
  auto r = testing::run_command({testing::bin_dir() + "/k3ctl", "certs", "--out", dir});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  return dir;
}

std::string token_file(const TempDir& tmp, const std::string& token) {
  const std::string p = tmp.file("token");
  testing::write_file(p, token + "\n");
  ::chmod(p.c_str(), 0600);
  return p;
}

// `bytes` bytes that parse as a DescribeRequest holding one unknown field
// (15, length-delimited) of filler; shared by every call (no copy per call).
const std::string& payload(size_t bytes) {
  static std::string big;
  if (big.size() != bytes) {
    big.assign(bytes, 'x');
    size_t n = bytes - 6;  // tag (1) + varint length (5)
    big[0] = static_cast<char>((15 << 3) | 2);
    for (int i = 1; i <= 5; ++i) {
      big[i] = static_cast<char>((n & 0x7f) | (i < 5 ? 0x80 : 0));
      n >>= 7;
    }
  }
  return big;
}

struct Client {
  std::shared_ptr<grpc::Channel> channel;
  std::string token;  // "" = none sent

  // `method` with a request of `bytes` bytes (payload()), sent as is.
  grpc::Status call(const std::string& method, size_t bytes) const {
    grpc::GenericStub stub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(120));
    if (!token.empty()) ctx.AddMetadata(rpc::kAuthMetadataKey, rpc::bearer(token));
    const std::string& p = payload(bytes);
    grpc::Slice slice(p.data(), p.size(), grpc::Slice::STATIC_SLICE);
    grpc::ByteBuffer req(&slice, 1), resp;
    std::promise<grpc::Status> done;
    stub.UnaryCall(&ctx, method, grpc::StubOptions(), &req, &resp,
                   [&done](grpc::Status s) { done.set_value(std::move(s)); });
    return done.get_future().get();
  }

  grpc::Status describe(k3serve::v1::DescribeResponse* out) const {
    auto stub = k3serve::v1::RemoteExpertService::NewStub(channel);
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    if (!token.empty()) ctx.AddMetadata(rpc::kAuthMetadataKey, rpc::bearer(token));
    return stub->Describe(&ctx, k3serve::v1::DescribeRequest(), out);
  }
};

std::shared_ptr<grpc::Channel> channel_to(const std::string& address, const std::string& ca) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  if (ca.empty())
    return grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = testing::read_file(ca);
  return grpc::CreateCustomChannel(address, grpc::SslCredentials(o), args);
}

// The growth of expertd's RSS (peak and after, in MB) over two concurrent
// calls of `method` with `bytes` from `c`; their statuses in `codes`.
double growth_mb(int pid, const Client& c, const std::string& method, size_t bytes,
                 std::vector<grpc::StatusCode>* codes) {
  payload(bytes);  // built before measuring (the client's, not the server's)
  const long before = status_kb(pid, "VmRSS");
  reset_peak(pid);
  auto a = std::async(std::launch::async, [&] { return c.call(method, bytes); });
  auto b = std::async(std::launch::async, [&] { return c.call(method, bytes); });
  const grpc::Status sa = a.get(), sb = b.get();
  codes->assign({sa.error_code(), sb.error_code()});
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  const long peak = status_kb(pid, "VmHWM"), after = status_kb(pid, "VmRSS");
  EXPECT_GT(before, 0);
  return static_cast<double>(std::max(peak, after) - before) / 1024.0;
}

void expect_bounded(RemoteExpertd& h, const Client& anonymous, const Client& wrong,
                    const Client& good) {
  const int pid = h.d->proc->pid();
  // Two concurrent 400 MB calls with no token, then with a wrong one.
  for (const Client* c : {&anonymous, &wrong}) {
    std::vector<grpc::StatusCode> codes;
    const double mb = growth_mb(pid, *c, kDescribe, kBig, &codes);
    std::printf("two concurrent 400 MB Describe calls (%s): expertd grew %.1f MB, codes %d %d\n",
                c->token.empty() ? "no token" : "a wrong token", mb, codes[0], codes[1]);
    EXPECT_LE(mb, 32.0) << "expertd grew by " << mb << " MB";
    for (grpc::StatusCode code : codes)
      EXPECT_TRUE(code == grpc::StatusCode::UNAUTHENTICATED ||
                  code == grpc::StatusCode::RESOURCE_EXHAUSTED)
          << code;
  }
  EXPECT_NE(h.log().find("refused Describe before reading it: no auth token"), std::string::npos)
      << h.log();

  // With the token: Describe over its small cap is refused, not parsed.
  const grpc::Status over = good.call(kDescribe, 64u << 10);
  EXPECT_EQ(over.error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED) << over.error_message();
  EXPECT_NE(over.error_message().find("cap of 4096 bytes"), std::string::npos)
      << over.error_message();

  // The legitimate calls still answer; without the token they do not.
  k3serve::v1::DescribeResponse d;
  grpc::Status s = good.describe(&d);
  EXPECT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(d.remote_listen(), h.address);
  s = anonymous.describe(&d);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_NE(s.error_message().find("no auth token"), std::string::npos) << s.error_message();
  EXPECT_EQ(h.stats().remote_requests(), 0u);  // nothing computed for any of them
  EXPECT_TRUE(h.d->answers_health());
}

TEST(RemoteListenerMemory, TlsTokenRefusedBeforeTheMessageIsRead) {
  TempDir tmp;
  const std::string certs = make_certs(tmp);
  const std::string tok = token_file(tmp, "mem-token-1234567");
  RemoteExpertd h(tmp, "rmemtls",
                  {"--tls-cert", certs + "/server.pem", "--tls-key", certs + "/server.key",
                   "--auth-token-file", tok},
                  testing::tiny_model_dir());
  ASSERT_TRUE(h.wait_ready()) << h.log();
  auto ch = channel_to(h.address, certs + "/ca.pem");
  expect_bounded(h, Client{ch, ""}, Client{ch, "not-the-token"}, Client{ch, "mem-token-1234567"});
}

TEST(RemoteListenerMemory, InsecureTokenRefusedBeforeTheMessageIsRead) {
  TempDir tmp;
  const std::string tok = token_file(tmp, "mem-token-7654321");
  RemoteExpertd h(tmp, "rmemins", {"--insecure-remote", "--auth-token-file", tok},
                  testing::tiny_model_dir());
  ASSERT_TRUE(h.wait_ready()) << h.log();
  auto ch = channel_to(h.address, "");
  expect_bounded(h, Client{ch, ""}, Client{ch, "not-the-token"}, Client{ch, "mem-token-7654321"});
}

}  // namespace
}  // namespace k3
