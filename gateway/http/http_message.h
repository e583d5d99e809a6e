// One HTTP request as the server hands it to a handler, the response a
// handler gives back, and the Exchange through which it does so (a whole
// response, or a chunked stream written piece by piece with backpressure).
// No Boost here: the server (http_server.cpp) implements Exchange.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace k3::gateway {

using HeaderList = std::vector<std::pair<std::string, std::string>>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ... as sent
  std::string target;  // path and query as sent
  std::string path;    // target up to '?'
  HeaderList headers;  // in order, names as sent
  std::string body;
  std::string request_id;  // the client's X-Request-Id when sane, else generated
  std::string remote;      // "HOST:PORT" of the client

  // The first header named `name` (case-insensitive), if any.
  std::optional<std::string_view> header(std::string_view name) const;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  HeaderList headers;  // besides Content-Type, Content-Length, Connection
  std::string body;
  // For the 4xx log line: what was wrong (the error message).
  std::string error;
};

// The response side of one request, used by its handler on a worker thread.
// Thread-safe: alive() may be polled from any thread.
class Exchange {
 public:
  virtual ~Exchange() = default;
  // False once the client has gone (EOF or an error on the socket's read
  // side, a write that timed out, the server stopping).
  virtual bool alive() const = 0;
  // The whole response; at most one of reply() or start_stream() per request.
  virtual void reply(HttpResponse response) = 0;
  // A chunked response's head (`response.body` is ignored); false when the
  // client is gone.
  virtual bool start_stream(const HttpResponse& head) = 0;
  // One chunk; blocks until the socket took it (backpressure). False when the
  // client is gone or did not read within the server's write timeout.
  virtual bool write(std::string_view chunk) = 0;
  // The last chunk; the connection then serves its next request.
  virtual void end_stream() = 0;

  // alive() as a callable that keeps this exchange alive.
  static std::function<bool()> alive_fn(const std::shared_ptr<Exchange>& ex) {
    return [ex] { return ex->alive(); };
  }
};

// A handler: runs on a worker thread, answers through the exchange.
using HttpHandler = std::function<void(const HttpRequest&, const std::shared_ptr<Exchange>&)>;

// "HTTP/1.1 <code> <reason>" reason phrases ("Not Found"); "" when unknown.
std::string_view reason_phrase(int status);

}  // namespace k3::gateway
