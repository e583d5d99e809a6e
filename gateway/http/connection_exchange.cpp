#include "gateway/http/connection_exchange.h"

#include <chrono>
#include <condition_variable>
#include <mutex>

#include "gateway/http/wire_format.h"
#include "shared/base/log.h"

namespace k3::gateway {

ConnectionExchange::ConnectionExchange(std::shared_ptr<Connection> c, std::string request_id,
                                       std::string method, std::string path, bool keep_alive,
                                       bool http10)
    : c_(std::move(c)),
      id_(std::move(request_id)),
      method_(std::move(method)),
      path_(std::move(path)),
      keep_alive_(keep_alive),
      http10_(http10) {}

ConnectionExchange::~ConnectionExchange() {
  if (!answered_)
    reply(error_response(500, "internal_error", "the handler gave no response"));
  else if (streaming_)
    end_stream();
}

void ConnectionExchange::reply(HttpResponse r) {
  if (answered_) return;
  answered_ = true;
  log_client_error(r);
  c_->post_write(serialize_response(r, id_, keep_alive_, false, method_ == "HEAD"), [](bool) {});
  c_->post_finish(keep_alive_);
}

bool ConnectionExchange::start_stream(const HttpResponse& head) {
  if (answered_) return false;
  answered_ = true;
  streaming_ = true;
  log_client_error(head);
  if (http10_) keep_alive_ = false;
  return blocking_write(serialize_response(head, id_, keep_alive_, !http10_));
}

bool ConnectionExchange::write(std::string_view chunk) {
  // A HEAD's stream is its head alone.
  if (!streaming_ || chunk.empty() || method_ == "HEAD") return streaming_ && alive();
  return blocking_write(http10_ ? std::string(chunk) : chunk_frame(chunk));
}

void ConnectionExchange::end_stream() {
  if (!streaming_) return;
  streaming_ = false;
  if (!http10_ && method_ != "HEAD") c_->post_write("0\r\n\r\n", [](bool) {});
  c_->post_finish(keep_alive_);
}

void ConnectionExchange::log_client_error(const HttpResponse& r) const {
  if (r.status >= 400 && r.status < 500)
    base::logger("gateway")->info("[{}] {} {} {}: {}", id_, r.status, method_, path_, r.error);
}

bool ConnectionExchange::blocking_write(std::string data) {
  if (!alive()) return false;
  struct Wait {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false, ok = false;
  };
  auto w = std::make_shared<Wait>();
  c_->post_write(std::move(data), [w](bool ok) {
    std::lock_guard<std::mutex> lk(w->mu);
    w->done = true;
    w->ok = ok;
    w->cv.notify_all();
  });
  std::unique_lock<std::mutex> lk(w->mu);
  // The write deadline closes the connection, which completes the write; a
  // stopping server may never run it.
  while (!w->done && !c_->stopping()) w->cv.wait_for(lk, std::chrono::milliseconds(100));
  return w->done && w->ok;
}

}  // namespace k3::gateway
