// The Beast HTTP server's wire limits against hostile raw-TCP clients written
// here: oversized and too many headers, bad and huge Content-Length, chunked
// bodies over the limit, a slowloris client, the connection cap, pipelining
// order, keep-alive latency (TCP_NODELAY), a client that stops reading, and a
// hang-up seen while a handler runs.
#include "gateway/http/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <string>
#include <thread>

namespace k3::gateway {
namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// A raw client socket with a receive timeout.
class Raw {
 public:
  explicit Raw(int port, int rcvbuf = 0) {
    fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
    if (rcvbuf > 0) ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &rcvbuf, sizeof rcvbuf);
    sockaddr_in sa{};
    sa.sin_family = AF_INET;
    sa.sin_port = htons(static_cast<uint16_t>(port));
    ::inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    ok_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&sa), sizeof sa) == 0;
    const int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  ~Raw() {
    if (fd_ >= 0) ::close(fd_);
  }
  bool ok() const { return ok_; }
  bool send(const std::string& s) {
    size_t off = 0;
    while (off < s.size()) {
      const ssize_t n = ::send(fd_, s.data() + off, s.size() - off, MSG_NOSIGNAL);
      if (n <= 0) return false;
      off += static_cast<size_t>(n);
    }
    return true;
  }
  // Reads until `until` appears, EOF, or `timeout_s`.
  std::string read_until(const std::string& until, double timeout_s = 5) {
    const auto t0 = Clock::now();
    while (buf_.find(until) == std::string::npos && since(t0) < timeout_s) {
      if (!fill(timeout_s - since(t0))) break;
    }
    return buf_;
  }
  // Reads until EOF (true) or timeout (false).
  bool read_eof(double timeout_s) {
    const auto t0 = Clock::now();
    while (since(t0) < timeout_s)
      if (!fill(timeout_s - since(t0))) return eof_;
    return false;
  }
  const std::string& data() const { return buf_; }
  void close() {
    ::close(fd_);
    fd_ = -1;
  }

 private:
  bool fill(double timeout_s) {
    pollfd p{fd_, POLLIN, 0};
    if (::poll(&p, 1, static_cast<int>(timeout_s * 1000) + 1) <= 0) return false;
    char b[65536];
    const ssize_t n = ::recv(fd_, b, sizeof b, 0);
    if (n <= 0) {
      eof_ = true;
      return false;
    }
    buf_.append(b, static_cast<size_t>(n));
    return true;
  }
  int fd_ = -1;
  bool ok_ = false, eof_ = false;
  std::string buf_;
};

int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return -1;
  return std::stoi(response.substr(9, 3));
}

class HttpServerTest : public ::testing::Test {
 protected:
  void start(HttpServerOptions o = {}) {
    server_ = std::make_unique<HttpServer>(
        o, [this](const HttpRequest& r, const std::shared_ptr<Exchange>& ex) { handle(r, ex); },
        &metrics_);
    auto bound = server_->start("127.0.0.1", 0);
    ASSERT_TRUE(bound.ok()) << bound.status();
    port_ = std::stoi(bound->substr(bound->rfind(':') + 1));
  }
  void TearDown() override {
    if (server_) server_->stop();
  }

  void handle(const HttpRequest& r, const std::shared_ptr<Exchange>& ex) {
    HttpResponse res;
    if (r.path == "/slow") {
      std::this_thread::sleep_for(std::chrono::milliseconds(300));
      res.body = "slow";
    } else if (r.path == "/watch") {
      // Runs until the client goes away, as a generation would.
      const auto t0 = Clock::now();
      while (ex->alive() && since(t0) < 10)
        std::this_thread::sleep_for(std::chrono::milliseconds(5));
      gone_at_ = Clock::now();
      watch_ended_ = true;
      return;
    } else if (r.path == "/stream") {
      HttpResponse head;
      head.content_type = "text/event-stream";
      ex->start_stream(head);
      const std::string chunk(64 << 10, 'x');
      while (ex->write(chunk)) ++chunks_;
      gone_at_ = Clock::now();
      watch_ended_ = true;
      return;
    } else {
      res.body = cat(r.method, " ", r.path, " ", r.body.size());
    }
    ex->reply(std::move(res));
  }

  MetricRegistry metrics_;
  std::unique_ptr<HttpServer> server_;
  int port_ = 0;
  std::atomic<bool> watch_ended_{false};
  std::atomic<int> chunks_{0};
  Clock::time_point gone_at_;
};

TEST_F(HttpServerTest, ServesKeepAliveRequestsQuickly) {
  start();
  Raw c(port_);
  ASSERT_TRUE(c.ok());
  // Warm-up, then 20 requests on the same connection: with TCP_NODELAY each
  // answer comes in well under the 40 ms of a delayed-ACK stall.
  ASSERT_TRUE(c.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_EQ(status_of(c.read_until("GET /a 0")), 200);
  const auto t0 = Clock::now();
  for (int i = 0; i < 20; ++i) {
    const std::string body = std::string(i + 1, 'b');
    ASSERT_TRUE(c.send(cat("POST /p", i, " HTTP/1.1\r\nHost: x\r\nContent-Length: ", body.size(),
                           "\r\n\r\n", body)));
    ASSERT_NE(c.read_until(cat("POST /p", i, " ", body.size())).find(cat("/p", i)),
              std::string::npos);
  }
  const double per = since(t0) / 20;
  std::printf("keep-alive request round trip: %.3f ms\n", per * 1000);
  EXPECT_LT(per, 0.02);
}

TEST_F(HttpServerTest, OversizedHeadersGet431AtOnce) {
  HttpServerOptions o;
  o.max_header_bytes = 8192;
  start(o);
  Raw c(port_);
  const auto t0 = Clock::now();
  ASSERT_TRUE(c.send("GET / HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(20000, 'a')));
  const std::string r = c.read_until("\r\n\r\n");
  EXPECT_EQ(status_of(r), 431) << r;
  EXPECT_NE(r.find("max-header-bytes"), std::string::npos);
  EXPECT_LT(since(t0), 1.0);
  EXPECT_TRUE(c.read_eof(2));
  EXPECT_NE(metrics_.render().find("k3_http_wire_errors_total{code=\"431\"} 1"), std::string::npos);
}

TEST_F(HttpServerTest, TooManyHeadersGet431) {
  HttpServerOptions o;
  o.max_header_count = 10;
  start(o);
  Raw c(port_);
  std::string req = "GET / HTTP/1.1\r\nHost: x\r\n";
  for (int i = 0; i < 11; ++i) req += cat("X-H", i, ": v\r\n");
  ASSERT_TRUE(c.send(req + "\r\n"));
  const std::string r = c.read_until("\r\n\r\n");
  EXPECT_EQ(status_of(r), 431) << r;
  EXPECT_NE(r.find("max-header-count"), std::string::npos);
}

TEST_F(HttpServerTest, BadContentLengthsAreRefusedAtOnce) {
  HttpServerOptions o;
  o.max_body_bytes = 1 << 20;
  start(o);
  for (const char* cl : {"-5", "abc", "1e3", "5, 6"}) {
    Raw c(port_);
    const auto t0 = Clock::now();
    ASSERT_TRUE(c.send(cat("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: ", cl, "\r\n\r\n")));
    const std::string r = c.read_until("\r\n\r\n", 3);
    EXPECT_EQ(status_of(r), 400) << cl << ": " << r;
    EXPECT_LT(since(t0), 0.5) << cl;
  }
  // Over the limit: 413 before any of the body is sent.
  Raw c(port_);
  const auto t0 = Clock::now();
  ASSERT_TRUE(c.send("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999\r\n\r\n"));
  const std::string r = c.read_until("\r\n\r\n", 3);
  EXPECT_EQ(status_of(r), 413) << r;
  EXPECT_NE(r.find("max-body-bytes"), std::string::npos);
  EXPECT_LT(since(t0), 0.5);
}

TEST_F(HttpServerTest, ChunkedBodiesAreCountedToo) {
  HttpServerOptions o;
  o.max_body_bytes = 4096;
  start(o);
  Raw ok(port_);
  ASSERT_TRUE(
      ok.send("POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"
              "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n"));
  EXPECT_NE(ok.read_until("POST /p 11").find("POST /p 11"), std::string::npos) << ok.data();
  Raw big(port_);
  ASSERT_TRUE(big.send("POST /p HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  const std::string chunk = cat("800\r\n", std::string(0x800, 'z'), "\r\n");
  for (int i = 0; i < 3; ++i) big.send(chunk);
  const std::string r = big.read_until("\r\n\r\n", 3);
  EXPECT_EQ(status_of(r), 413) << r;
}

TEST_F(HttpServerTest, ABodyShorterThanItsContentLengthTimesOut) {
  HttpServerOptions o;
  o.header_timeout_s = 1;
  start(o);
  Raw c(port_);
  const auto t0 = Clock::now();
  ASSERT_TRUE(c.send("POST /p HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nonly a few"));
  const std::string r = c.read_until("\r\n\r\n", 4);
  EXPECT_EQ(status_of(r), 408) << r;
  EXPECT_NEAR(since(t0), 1.0, 0.5);
}

TEST_F(HttpServerTest, ASlowlorisIsCutAtTheHeadDeadline) {
  HttpServerOptions o;
  o.header_timeout_s = 1;
  start(o);
  Raw c(port_);
  const auto t0 = Clock::now();
  // One byte every half timeout: each byte is in time, the head is not.
  const std::string head = "GET / HTTP/1.1\r\nHost: x\r\nX-Slow: abcdefghijklmnop\r\n\r\n";
  bool cut = false;
  for (char ch : head) {
    if (!c.send(std::string(1, ch))) {
      cut = true;
      break;
    }
    if (!c.read_until("\r\n\r\n", 0.5).empty()) break;
  }
  const std::string r = c.read_until("\r\n\r\n", 1);
  EXPECT_TRUE(cut || status_of(r) == 408) << r;
  EXPECT_LT(since(t0), 2.5);
}

TEST_F(HttpServerTest, IdleKeepAliveConnectionsAreClosed) {
  HttpServerOptions o;
  o.idle_timeout_s = 0.5;
  start(o);
  Raw c(port_);
  ASSERT_TRUE(c.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_EQ(status_of(c.read_until("GET /a 0")), 200);
  const auto t0 = Clock::now();
  EXPECT_TRUE(c.read_eof(3));
  EXPECT_NEAR(since(t0), 0.5, 0.4);
}

TEST_F(HttpServerTest, ConnectionsOverTheCapGet503AndAreClosed) {
  HttpServerOptions o;
  o.max_connections = 2;
  start(o);
  Raw a(port_), b(port_);
  ASSERT_TRUE(a.send("GET /a HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(b.send("GET /b HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_EQ(status_of(a.read_until("GET /a 0")), 200);
  ASSERT_EQ(status_of(b.read_until("GET /b 0")), 200);
  EXPECT_NE(metrics_.render().find("k3_http_connections 2"), std::string::npos);
  Raw over(port_);
  const std::string r = over.read_until("\r\n\r\n");
  EXPECT_EQ(status_of(r), 503) << r;
  EXPECT_NE(r.find("Retry-After: 1"), std::string::npos);
  EXPECT_TRUE(over.read_eof(3));
  EXPECT_NE(metrics_.render().find("k3_http_connections_refused_total 1"), std::string::npos);
  // One leaves: a new client gets in.
  a.close();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  Raw again(port_);
  ASSERT_TRUE(again.send("GET /c HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(status_of(again.read_until("GET /c 0")), 200);
}

TEST_F(HttpServerTest, PipelinedResponsesComeInOrder) {
  start();
  Raw c(port_);
  // The first is slow; the answers must still come first-in first-out.
  ASSERT_TRUE(
      c.send("GET /slow HTTP/1.1\r\nHost: x\r\n\r\n"
             "GET /fast1 HTTP/1.1\r\nHost: x\r\n\r\n"
             "POST /fast2 HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc"
             "GET /last HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"));
  EXPECT_TRUE(c.read_eof(5));
  const std::string& r = c.data();
  const size_t slow = r.find("\r\n\r\nslow"), f1 = r.find("GET /fast1 0"),
               f2 = r.find("POST /fast2 3"), last = r.find("GET /last 0");
  ASSERT_NE(slow, std::string::npos) << r;
  ASSERT_NE(f1, std::string::npos) << r;
  ASSERT_NE(f2, std::string::npos) << r;
  ASSERT_NE(last, std::string::npos) << r;
  EXPECT_LT(slow, f1);
  EXPECT_LT(f1, f2);
  EXPECT_LT(f2, last);
}

TEST_F(HttpServerTest, AHangUpIsSeenAtOnceWhileAHandlerRuns) {
  start();
  Raw c(port_);
  ASSERT_TRUE(c.send("GET /watch HTTP/1.1\r\nHost: x\r\n\r\n"));
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  EXPECT_FALSE(watch_ended_);
  const auto t0 = Clock::now();
  c.close();
  while (!watch_ended_ && since(t0) < 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_TRUE(watch_ended_);
  const double took = std::chrono::duration<double>(gone_at_ - t0).count();
  std::printf("hang-up noticed by the handler after %.1f ms\n", took * 1000);
  EXPECT_LT(took, 0.1);
}

TEST_F(HttpServerTest, AClientThatStopsReadingIsDroppedAfterTheWriteTimeout) {
  HttpServerOptions o;
  o.write_timeout_s = 0.5;
  start(o);
  Raw c(port_, /*rcvbuf=*/4096);
  ASSERT_TRUE(c.send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"));
  // Never reads: the socket buffers fill, a write stalls, the server drops us.
  const auto t0 = Clock::now();
  while (!watch_ended_ && since(t0) < 10) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  ASSERT_TRUE(watch_ended_);
  EXPECT_LT(since(t0), 5.0);
  EXPECT_LT(chunks_.load(), 200);  // bounded by the socket buffers, not by our patience
  EXPECT_NE(metrics_.render().find("k3_http_slow_readers_dropped_total 1"), std::string::npos);
}

TEST_F(HttpServerTest, MalformedRequestLinesGet400) {
  start();
  Raw c(port_);
  ASSERT_TRUE(c.send("NOT A REQUEST\r\n\r\n"));
  EXPECT_EQ(status_of(c.read_until("\r\n\r\n")), 400) << c.data();
}

TEST_F(HttpServerTest, ExpectContinueIsAnswered) {
  start();
  Raw c(port_);
  ASSERT_TRUE(
      c.send("POST /p HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
             "Content-Length: 4\r\n\r\n"));
  EXPECT_NE(c.read_until("100 Continue\r\n\r\n", 2).find("HTTP/1.1 100 Continue"),
            std::string::npos);
  ASSERT_TRUE(c.send("body"));
  EXPECT_NE(c.read_until("POST /p 4").find("POST /p 4"), std::string::npos) << c.data();
}

}  // namespace
}  // namespace k3::gateway
