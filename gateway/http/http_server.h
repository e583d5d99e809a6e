// The gateway's HTTP/1.1 server on Boost.Beast over Asio (optionally TLS):
// a small fixed pool of I/O threads parses requests and writes responses;
// handlers (generation) run on a separate worker pool. Every wire limit is an
// immediate error: header bytes and count (431), body size (413; chunked
// bodies counted too), malformed framing such as a bad Content-Length (400),
// one deadline for a request's whole head and body (408, slow clients), an
// idle keep-alive timeout, a cap on open connections (503 + Retry-After, then
// close), a write deadline (a client that stops reading is dropped). Requests
// on one connection are answered in order (pipelining). While a handler runs
// the socket's read side is watched: EOF means the client is gone, and the
// handler's Exchange::alive() turns false at once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "gateway/core/metric_registry.h"
#include "gateway/http/http_message.h"
#include "shared/status.h"

namespace k3::gateway {

struct HttpServerOptions {
  int io_threads = 2;        // Asio threads: parsing and writing only
  int worker_threads = 128;  // handlers; a running generation holds one
  size_t max_header_bytes = 64u << 10;
  int max_header_count = 100;
  size_t max_body_bytes = 8u << 20;
  int max_connections = 1024;
  double header_timeout_s = 10;  // head and body of one request
  double idle_timeout_s = 60;    // keep-alive connection with nothing to do
  double write_timeout_s = 30;   // one write the client does not take
  int max_pipelined = 16;        // requests read ahead on one connection
  std::string tls_cert_file;     // PEM; both set: HTTPS
  std::string tls_key_file;
};

// Thread-safe: start() once, then stop() (also from the destructor).
class HttpServer {
 public:
  // `metrics` gets k3_http_connections and the wire-error counters; it must
  // outlive the server.
  HttpServer(HttpServerOptions options, HttpHandler handler, MetricRegistry* metrics);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds HOST:PORT (port 0: any free one) and serves; returns the bound
  // "HOST:PORT". Fails for an unusable TLS certificate or key.
  StatusOr<std::string> start(const std::string& host, int port);
  // Closes the listener and every connection (handlers see alive() false),
  // then joins the threads.
  void stop();

  struct Impl;

 private:
  std::unique_ptr<Impl> impl_;
};

}  // namespace k3::gateway
