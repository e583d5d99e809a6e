// The server's Exchange (http_message.h): one request's response written
// through its connection. A whole response is queued and the handler moves
// on; a streamed chunk blocks the handler until the socket took it, which is
// the backpressure a client that reads slowly puts on its generation.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include "gateway/http/http_message.h"

namespace k3::gateway {

// What an exchange needs of its connection (the server's session). Thread-
// safe: called from handler threads.
class Connection {
 public:
  virtual ~Connection() = default;
  // The client is gone (EOF, an error, the write deadline) or the server stops.
  virtual bool gone() const = 0;
  virtual bool stopping() const = 0;
  // Queues `data` after every earlier write; `done(ok)` once written or failed.
  virtual void post_write(std::string data, std::function<void(bool)> done) = 0;
  // The response is complete: serve the next request, or close.
  virtual void post_finish(bool keep_alive) = 0;
};

// Used by one handler thread at a time (alive() from any thread).
class ConnectionExchange final : public Exchange {
 public:
  ConnectionExchange(std::shared_ptr<Connection> c, std::string request_id, std::string method,
                     std::string path, bool keep_alive, bool http10);
  // A handler that returned without answering gets a 500; an open stream ends.
  ~ConnectionExchange() override;

  bool alive() const override { return !c_->gone(); }
  void reply(HttpResponse r) override;
  bool start_stream(const HttpResponse& head) override;
  bool write(std::string_view chunk) override;
  void end_stream() override;

 private:
  // Every 4xx at info, with the request id.
  void log_client_error(const HttpResponse& r) const;
  bool blocking_write(std::string data);

  std::shared_ptr<Connection> c_;
  const std::string id_, method_, path_;
  bool keep_alive_;
  const bool http10_;  // no chunked encoding: a stream ends with the connection
  bool answered_ = false, streaming_ = false;
};

}  // namespace k3::gateway
