// The gateway's HTTP wire and routes over a scripted engined: unknown routes
// and wrong methods, /tokenize and friends, body and max_tokens checks,
// hang-ups and slow readers cancelling engined, API keys and CORS, TLS.
#include "tests/gateway/fake_engine_fixture.h"

namespace k3::gateway {
namespace {

using namespace fake_engine;

int raw_connect(int port, int rcvbuf = 0) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (rcvbuf > 0) ::setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
  sockaddr_in sa{};
  sa.sin_family = AF_INET;
  sa.sin_port = htons(static_cast<uint16_t>(port));
  ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  EXPECT_EQ(::connect(fd, reinterpret_cast<sockaddr*>(&sa), sizeof sa), 0);
  return fd;
}
std::string raw_post(const std::string& path, const std::string& body) {
  return cat("POST ", path, " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n",
             "Content-Length: ", body.size(), "\r\n\r\n", body);
}

TEST_F(GatewayOverFakeEngine, UnknownRoutesAndWrongMethods) {
  httplib::Client c("127.0.0.1", port_);
  auto r = c.Get("/v2/nothing");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "not_found");
  EXPECT_FALSE(r->get_header_value("X-Request-Id").empty());
  r = c.Get("/v1/chat/completions");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "POST");
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "method_not_allowed");
  r = c.Delete("/v1/models");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 405);
  EXPECT_EQ(r->get_header_value("Allow"), "GET, HEAD");
}

// HEAD answers what GET would, head only (RFC 9110 9.3.2): the GET's
// Content-Length, no body, and the keep-alive connection then serves the
// next request (a body sent after the head would be read as its answer).
TEST_F(GatewayOverFakeEngine, HeadIsGetWithoutTheBody) {
  httplib::Client c("127.0.0.1", port_);
  auto get = c.Get("/v1/models");
  ASSERT_TRUE(get);
  ASSERT_EQ(get->status, 200);
  const int fd = raw_connect(port_);
  const std::string two =
      "HEAD /v1/models HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n";
  ASSERT_EQ(::send(fd, two.data(), two.size(), 0), static_cast<ssize_t>(two.size()));
  std::string got;
  char buf[4096];
  for (int i = 0; i < 50 && got.find("\r\n\r\n", got.find("HTTP/1.1", 1)) == std::string::npos;
       ++i) {
    const ssize_t n = ::recv(fd, buf, sizeof buf, 0);
    if (n <= 0) break;
    got.append(buf, static_cast<size_t>(n));
  }
  ::close(fd);
  ASSERT_EQ(got.rfind("HTTP/1.1 200", 0), 0u) << got;
  EXPECT_NE(got.find(cat("Content-Length: ", get->body.size(), "\r\n")), std::string::npos) << got;
  const size_t head_end = got.find("\r\n\r\n") + 4;
  EXPECT_EQ(got.compare(head_end, 9, "HTTP/1.1 "), 0)
      << "the HEAD answer carried a body: " << got.substr(head_end, 80);
  auto post_only = c.Head("/v1/chat/completions");
  ASSERT_TRUE(post_only);
  EXPECT_EQ(post_only->status, 405);
  EXPECT_EQ(post_only->get_header_value("Allow"), "POST");
}

TEST_F(GatewayOverFakeEngine, ModelByIdTokenizeDetokenizeAndApplyTemplate) {
  httplib::Client c("127.0.0.1", port_);
  auto r = c.Get("/v1/models/tiny");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["id"], "tiny");
  EXPECT_EQ(json::parse(r->body)["object"], "model");
  r = c.Get("/v1/models/other");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 404);
  EXPECT_EQ(json::parse(r->body)["error"]["code"], "model_not_found");

  auto t = post("/tokenize", {{"content", "hello world"}});
  ASSERT_TRUE(t);
  ASSERT_EQ(t->status, 200) << t->body;
  const auto ids = json::parse(t->body)["tokens"].get<std::vector<int32_t>>();
  EXPECT_EQ(ids, *tok_->encode("hello world"));
  auto d = post("/detokenize", {{"tokens", ids}});
  ASSERT_TRUE(d);
  EXPECT_EQ(json::parse(d->body)["content"], "hello world");
  d = post("/detokenize", {{"tokens", {1, -3}}});
  ASSERT_TRUE(d);
  EXPECT_EQ(d->status, 400);
  EXPECT_NE(d->body.find("tokens[1]"), std::string::npos);
  t = post("/tokenize", {{"text", "x"}});  // not a field of /tokenize: ignored, content missing
  ASSERT_TRUE(t);
  EXPECT_EQ(t->status, 400);
  EXPECT_NE(t->body.find("'content'"), std::string::npos);
  t = post("/tokenize", {{"content", "x"}, {"text", "x"}});
  ASSERT_TRUE(t);
  EXPECT_EQ(t->status, 200) << t->body;
  EXPECT_EQ(t->get_header_value("x-k3-ignored-fields"), "text");
  t = post("/tokenize", json::object());
  ASSERT_TRUE(t);
  EXPECT_EQ(t->status, 400);
  EXPECT_NE(t->body.find("'content'"), std::string::npos);

  auto a = post("/apply-template", {{"messages", {{{"role", "user"}, {"content", "hi there"}}}},
                                    {"enable_thinking", false}});
  ASSERT_TRUE(a);
  ASSERT_EQ(a->status, 200) << a->body;
  const json j = json::parse(a->body);
  EXPECT_NE(j["prompt"].get<std::string>().find("hi there"), std::string::npos);
  // The ids are what a generation would prefill.
  EXPECT_EQ(j["tokens"].get<std::vector<int32_t>>(),
            *tok_->encode_markup(j["prompt"].get<std::string>()));
}

TEST_F(GatewayOverFakeEngine, AJsonBodyIsAcceptedWhateverItsContentType) {
  script("<|open|>response<|sep|>ok<|close|>response<|sep|>");
  httplib::Client c("127.0.0.1", port_);
  const json body = {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                     {"enable_thinking", false}};
  auto r = c.Post("/v1/chat/completions", body.dump(), "application/x-www-form-urlencoded");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
}

TEST_F(GatewayOverFakeEngine, MaxTokensBeyondTheContextIsRefused) {
  // The gateway learns engined's context from its first Describe poll.
  const auto t0 = std::chrono::steady_clock::now();
  while (core_->generator().max_context() == 0 &&
         std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_EQ(core_->generator().max_context(), 4096);
  auto r = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                         {"max_tokens", 1000000000}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("'max_tokens'"), std::string::npos) << r->body;
  EXPECT_NE(r->body.find("4096"), std::string::npos) << r->body;
}

TEST_F(GatewayOverFakeEngine, ANonStreamingHangUpCancelsEnginedWithinASecond) {
  std::string words;
  for (int i = 0; i < 2000; ++i) words += "w ";
  script(words);
  engine_.delay_ms = 5;  // 10 s of tokens
  const int fd = raw_connect(port_);
  const std::string req = raw_post(
      "/v1/chat/completions",
      json{{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"enable_thinking", false}}
          .dump());
  ASSERT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // tokens are flowing
  ASSERT_FALSE(engine_.cancelled);
  const auto t0 = std::chrono::steady_clock::now();
  ::close(fd);
  while (!engine_.cancelled && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(5))
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
  const double took = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  std::printf("non-streaming hang-up: engined cancelled after %.0f ms\n", took * 1000);
  EXPECT_TRUE(engine_.cancelled);
  EXPECT_LT(took, 1.0);
}

// A write deadline of half a second.
class GatewaySlowReader : public GatewayOverFakeEngine {
  void configure(GatewayConfig& c) override { c.write_timeout_s = 0.5; }
};

TEST_F(GatewaySlowReader, AnSseClientThatStopsReadingIsDroppedAndCancelled) {
  std::string words;
  for (int i = 0; i < 20000; ++i) words += "wwwwwwwwwwwwwwwwwwwwwwwwwwwwwwww ";
  script(words);
  const int fd = raw_connect(port_, /*rcvbuf=*/2048);
  const std::string req =
      raw_post("/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                            {"enable_thinking", false},
                                            {"stream", true}}
                                           .dump());
  ASSERT_EQ(::write(fd, req.data(), req.size()), static_cast<ssize_t>(req.size()));
  // Never reads. The cancel, the freed admission slot and the metric come
  // from different threads, moments apart: wait for all three.
  auto dropped = [&] {
    return engine_.cancelled && core_->admission().running() == 0 &&
           core_->metrics().render().find("k3_http_slow_readers_dropped_total 1") !=
               std::string::npos;
  };
  const auto t0 = std::chrono::steady_clock::now();
  while (!dropped() && std::chrono::steady_clock::now() - t0 < std::chrono::seconds(10))
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  EXPECT_TRUE(engine_.cancelled);
  EXPECT_EQ(core_->admission().running(), 0);
  EXPECT_NE(core_->metrics().render().find("k3_http_slow_readers_dropped_total 1"),
            std::string::npos);
  ::close(fd);
}

// API keys on, CORS for one origin.
class GatewayWithKeysAndCors : public GatewayOverFakeEngine {
  void configure(GatewayConfig& c) override {
    std::ofstream(tmp_.file("keys")) << "sk-test-key-1234567890\n";
    std::filesystem::permissions(tmp_.file("keys"), std::filesystem::perms(0600));
    c.api_keys_file = tmp_.file("keys");
    c.cors_origin = "https://app.example";
  }
};

TEST_F(GatewayWithKeysAndCors, EveryEndpointButHealthNeedsAKey) {
  httplib::Client c("127.0.0.1", port_);
  for (const char* path : {"/metrics", "/v1/models", "/v1/models/tiny", "/nowhere"}) {
    auto r = c.Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 401) << path;
  }
  auto t = c.Post("/tokenize", R"({"content": "x"})", "application/json");
  ASSERT_TRUE(t);
  EXPECT_EQ(t->status, 401);
  // /health answers anonymous probes, but only up or not.
  auto h = c.Get("/health");
  ASSERT_TRUE(h);
  EXPECT_EQ(h->status, 200);
  EXPECT_EQ(json::parse(h->body), json({{"status", "ok"}}));
  httplib::Headers auth = {{"Authorization", "Bearer sk-test-key-1234567890"}};
  h = c.Get("/health", auth);
  ASSERT_TRUE(h);
  EXPECT_TRUE(json::parse(h->body).contains("engined"));
  auto m = c.Get("/metrics", auth);
  ASSERT_TRUE(m);
  EXPECT_EQ(m->status, 200);
  EXPECT_EQ(m->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
  EXPECT_EQ(m->get_header_value("Access-Control-Expose-Headers"),
            "X-K3-Truncated, X-K3-Ignored-Fields");
}

// gRPC: the key is checked on the call's metadata before its message is read.
// A keyless request bigger than gRPC's 4 MB receive cap proves the order: a
// check in the handler would come after gRPC read (and refused) the message,
// RESOURCE_EXHAUSTED; the gate answers UNAUTHENTICATED first.
TEST_F(GatewayWithKeysAndCors, GrpcCallsWithoutAKeyAreRefusedBeforeTheirMessageIsRead) {
  grpc::ChannelArguments args;
  args.SetMaxSendMessageSize(-1);
  auto stub = v1::Gateway::NewStub(
      grpc::CreateCustomChannel(grpc_address_, grpc::InsecureChannelCredentials(), args));
  v1::TokenizeRequest big;
  big.set_model("tiny");
  big.set_text(std::string(6u << 20, 'x'));
  for (const char* key : {"", "Bearer not-a-configured-key"}) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
    if (*key != '\0') ctx.AddMetadata("authorization", key);
    v1::TokenizeResponse out;
    const grpc::Status s = stub->Tokenize(&ctx, big, &out);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::UNAUTHENTICATED)
        << key << ": " << s.error_message();
    EXPECT_NE(s.error_message().find("missing or invalid API key"), std::string::npos)
        << s.error_message();
  }
  // With the key the same request reaches gRPC's receive cap; Health needs no key.
  grpc::ClientContext ctx;
  ctx.AddMetadata("authorization", "Bearer sk-test-key-1234567890");
  v1::TokenizeResponse out;
  EXPECT_EQ(stub->Tokenize(&ctx, big, &out).error_code(), grpc::StatusCode::RESOURCE_EXHAUSTED);
  grpc::ClientContext hctx;
  v1::HealthResponse h;
  const grpc::Status hs = stub->Health(&hctx, v1::HealthRequest(), &h);
  EXPECT_TRUE(hs.ok()) << hs.error_message();
  grpc::ClientContext lctx;
  lctx.AddMetadata("authorization", "Bearer sk-test-key-1234567890");
  v1::ListModelsResponse models;
  const grpc::Status ls = stub->ListModels(&lctx, v1::ListModelsRequest(), &models);
  ASSERT_TRUE(ls.ok()) << ls.error_message();
  EXPECT_EQ(models.models(0).id(), "tiny");
}

TEST_F(GatewayWithKeysAndCors, PreflightsAreAnswered) {
  httplib::Client c("127.0.0.1", port_);
  auto r = c.Options("/v1/chat/completions");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 204);
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Origin"), "https://app.example");
  EXPECT_EQ(r->get_header_value("Access-Control-Allow-Methods"), "POST");
  EXPECT_NE(r->get_header_value("Access-Control-Allow-Headers").find("Authorization"),
            std::string::npos);
}

// Both APIs over TLS with a self-signed certificate made now.
class GatewayOverTls : public GatewayOverFakeEngine {
  void configure(GatewayConfig& c) override {
    const std::string cmd =
        cat("openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost ",
            "-addext subjectAltName=DNS:localhost,IP:127.0.0.1 -keyout ", tmp_.file("key.pem"),
            " -out ", tmp_.file("cert.pem"), " 2>/dev/null");
    ASSERT_EQ(std::system(cmd.c_str()), 0);
    c.tls_cert = tmp_.file("cert.pem");
    c.tls_key = tmp_.file("key.pem");
    grpc_listen_ = "127.0.0.1:0";
  }
};

TEST_F(GatewayOverTls, HttpsAndGrpcOverTls) {
  httplib::SSLClient c("127.0.0.1", port_);
  c.set_ca_cert_path(tmp_.file("cert.pem").c_str());
  c.enable_server_certificate_verification(true);
  auto r = c.Get("/v1/models");
  ASSERT_TRUE(r) << httplib::to_string(r.error());
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(json::parse(r->body)["data"][0]["id"], "tiny");
  // Plaintext on the TLS port gets nowhere.
  httplib::Client plain("127.0.0.1", port_);
  plain.set_read_timeout(2, 0);
  auto p = plain.Get("/v1/models");
  EXPECT_TRUE(!p || p->status != 200);

  std::stringstream ss;
  ss << std::ifstream(tmp_.file("cert.pem")).rdbuf();
  grpc::SslCredentialsOptions so;
  so.pem_root_certs = ss.str();
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride("localhost");
  auto stub = v1::Gateway::NewStub(
      grpc::CreateCustomChannel(grpc_address_, grpc::SslCredentials(so), args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  v1::ListModelsRequest req;
  v1::ListModelsResponse out;
  const grpc::Status s = stub->ListModels(&ctx, req, &out);
  ASSERT_TRUE(s.ok()) << s.error_message();
  EXPECT_EQ(out.models(0).id(), "tiny");
  // An insecure channel does not get an answer.
  auto insecure =
      v1::Gateway::NewStub(grpc::CreateChannel(grpc_address_, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx2;
  ctx2.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(3));
  EXPECT_FALSE(insecure->ListModels(&ctx2, req, &out).ok());
}

TEST(GatewayConfigTls, PlaintextOnANonLoopbackAddressIsRefused) {
  GatewayConfig c;
  c.model_dir = "m";
  c.http_listen = "0.0.0.0:8080";
  Status s = c.validate();
  EXPECT_FALSE(s.ok());
  EXPECT_NE(msg(s).find("--allow-plaintext"), std::string::npos);
  c.allow_plaintext = true;
  EXPECT_TRUE(c.validate().ok());
  c.allow_plaintext = false;
  c.http_listen = "127.0.0.1:8080";
  c.grpc_listen = "[::]:50051";
  EXPECT_FALSE(c.validate().ok());
  c.grpc_listen = "unix:/tmp/x.sock";
  EXPECT_TRUE(c.validate().ok());
}

}  // namespace
}  // namespace k3::gateway
