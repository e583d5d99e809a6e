#include "gateway/http/http_server.h"

#include <netinet/in.h>
#include <sys/socket.h>

#include <atomic>
#include <boost/asio.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <random>
#include <thread>
#include <unordered_map>

#include "gateway/http/connection_exchange.h"
#include "gateway/http/wire_format.h"
#include "shared/base/log.h"

namespace k3::gateway {

namespace asio = boost::asio;
namespace beast = boost::beast;
namespace bhttp = beast::http;
using tcp = asio::ip::tcp;
using Clock = std::chrono::steady_clock;

namespace {

Clock::duration seconds(double s) {
  return std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(s));
}

class SessionBase {
 public:
  virtual ~SessionBase() = default;
  virtual void shut() = 0;  // from any thread: close the connection
};

}  // namespace

struct HttpServer::Impl {
  Impl(HttpServerOptions o, HttpHandler h, MetricRegistry* m)
      : opt(std::move(o)),
        handler(std::move(h)),
        acceptor(io),
        workers(static_cast<size_t>(opt.worker_threads)),
        connections(m->gauge("k3_http_connections", "Open HTTP connections")),
        refused(m->counter("k3_http_connections_refused_total",
                           "HTTP connections refused with 503 over --max-connections")),
        wire_errors(m->counter_family(
            "k3_http_wire_errors_total",
            "HTTP requests refused before routing (bad framing, limits, timeouts), by status",
            {"code"})),
        dropped(m->counter("k3_http_slow_readers_dropped_total",
                           "HTTP connections dropped because a write passed --write-timeout-s")) {}

  void accept();
  template <class Stream>
  void launch(tcp::socket socket, bool refuse);
  void add_session(uint64_t id, std::weak_ptr<SessionBase> s) {
    std::lock_guard<std::mutex> lk(mu);
    sessions[id] = std::move(s);
  }
  void remove_session(uint64_t id) {
    std::lock_guard<std::mutex> lk(mu);
    sessions.erase(id);
  }

  HttpServerOptions opt;
  HttpHandler handler;
  // Before io: sessions destroyed with io's pending handlers unregister here.
  std::mutex mu;
  std::unordered_map<uint64_t, std::weak_ptr<SessionBase>> sessions;
  std::atomic<int> open{0};
  std::atomic<bool> stopping{false};
  std::atomic<uint64_t> next_id{0};
  asio::io_context io;
  std::optional<asio::executor_work_guard<asio::io_context::executor_type>> work;
  tcp::acceptor acceptor;
  std::optional<asio::ssl::context> tls;
  asio::thread_pool workers;
  std::vector<std::thread> io_threads;
  bool started = false, stopped = false;
  Gauge& connections;
  Counter& refused;
  CounterFamily& wire_errors;
  Counter& dropped;
};

namespace {

// One connection: reads requests (one read always outstanding, so EOF is
// seen at once), queues them, runs them one at a time on the worker pool and
// writes their responses in order. Everything but the Exchange's calls runs
// on the connection's strand.
template <class Stream>
class Session : public SessionBase,
                public Connection,
                public std::enable_shared_from_this<Session<Stream>> {
 public:
  using Impl = HttpServer::Impl;

  Session(Impl* srv, Stream stream, bool refuse)
      : srv_(srv),
        stream_(std::move(stream)),
        read_timer_(stream_.get_executor()),
        write_timer_(stream_.get_executor()),
        refuse_(refuse),
        id_(srv->next_id.fetch_add(1)) {
    if (!refuse_) srv_->connections.set(static_cast<double>(++srv_->open));
  }
  ~Session() override {
    if (!refuse_) srv_->connections.set(static_cast<double>(--srv_->open));
    srv_->remove_session(id_);
  }

  void run() {
    srv_->add_session(id_, this->weak_from_this());
    if constexpr (std::is_same_v<Stream, tcp::socket>) {
      begin();
    } else {
      arm_read_timer(srv_->opt.header_timeout_s, TimerMode::kHandshake);
      stream_.async_handshake(asio::ssl::stream_base::server,
                              [self = this->shared_from_this()](beast::error_code ec) {
                                self->read_timer_.cancel();
                                if (ec) return self->close();
                                self->begin();
                              });
    }
  }

  void shut() override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this()] { self->close(); });
  }

  // ---- called by the Exchange (worker thread) ----

  bool gone() const override { return gone_.load() || srv_->stopping.load(); }
  bool stopping() const override { return srv_->stopping.load(); }
  // Runs `data` through the write queue; `done(ok)` on the strand.
  void post_write(std::string data, std::function<void(bool)> done) override {
    asio::post(stream_.get_executor(), [self = this->shared_from_this(), d = std::move(data),
                                        done = std::move(done)]() mutable {
      self->write(std::make_shared<std::string>(std::move(d)), std::move(done));
    });
  }
  void post_finish(bool keep_alive) override {
    asio::post(stream_.get_executor(),
               [self = this->shared_from_this(), keep_alive] { self->finish(keep_alive); });
  }

 private:
  enum class TimerMode { kHandshake, kIdle, kHead, kLinger };
  struct Pending {
    HttpRequest request;
    bool keep_alive = true;
    bool http10 = false;
    std::optional<HttpResponse> preset;  // a wire error: written, then close
  };

  void begin() {
    if (refuse_) {
      srv_->refused.inc();
      HttpResponse r =
          error_response(503, "service_unavailable", "too many open connections; retry later");
      r.headers.emplace_back("Retry-After", "1");
      HttpRequest none;
      none.request_id = new_request_id();
      write(std::make_shared<std::string>(serialize_response(r, none.request_id, false, false)),
            [self = this->shared_from_this()](bool) { self->linger_close(); });
      return;
    }
    read_next();
  }

  bool idle() const { return !busy_ && queue_.empty(); }
  // A request starts running: the connection is no longer idle.
  void disarm_read_timer_if_idle_wait() {
    if (waiting_first_byte_ && timer_mode_ == TimerMode::kIdle) disarm_read_timer();
  }

  void arm_read_timer(double s, TimerMode mode) {
    timer_mode_ = mode;
    const uint64_t gen = ++timer_gen_;
    read_timer_.expires_after(seconds(s));
    read_timer_.async_wait([self = this->shared_from_this(), gen](beast::error_code ec) {
      if (ec || gen != self->timer_gen_) return;
      self->on_read_timeout();
    });
  }
  void disarm_read_timer() {
    ++timer_gen_;
    read_timer_.cancel();
  }

  void on_read_timeout() {
    switch (timer_mode_) {
      case TimerMode::kHandshake:
      case TimerMode::kIdle:
      case TimerMode::kLinger:
        return close();
      case TimerMode::kHead:
        head_timed_out_ = true;
        // Only the read is pending unless a response is being written; a
        // cancel would end that too, so then the connection just closes.
        if (writing_) return close();
        beast::error_code ec;
        beast::get_lowest_layer(stream_).cancel(ec);
        return;
    }
  }

  // Reads the next request: waits for its first byte (idle timeout when the
  // connection has nothing else to do), then head and body under one deadline.
  void read_next() {
    if (closed_ || reading_ || read_closed_) return;
    if (static_cast<int>(queue_.size()) >= srv_->opt.max_pipelined) return;
    reading_ = true;
    if (buf_.size() > 0) return read_head();
    waiting_first_byte_ = true;
    if (idle()) arm_read_timer(srv_->opt.idle_timeout_s, TimerMode::kIdle);
    stream_.async_read_some(buf_.prepare(4096),
                            [self = this->shared_from_this()](beast::error_code ec, size_t n) {
                              self->waiting_first_byte_ = false;
                              if (ec) return self->on_read_error(ec);
                              self->buf_.commit(n);
                              self->read_head();
                            });
  }

  void read_head() {
    parser_.emplace();
    parser_->header_limit(static_cast<uint32_t>(srv_->opt.max_header_bytes));
    parser_->body_limit(srv_->opt.max_body_bytes);
    head_timed_out_ = false;
    arm_read_timer(srv_->opt.header_timeout_s, TimerMode::kHead);
    bhttp::async_read_header(
        stream_, buf_, *parser_,
        [self = this->shared_from_this()](beast::error_code ec, size_t) { self->on_header(ec); });
  }

  void on_header(beast::error_code ec) {
    if (ec) return on_read_error(ec);
    const auto& h = parser_->get();
    if (std::distance(h.begin(), h.end()) > srv_->opt.max_header_count)
      return wire_error(
          431, "request_header_fields_too_large",
          cat("more than ", srv_->opt.max_header_count, " header fields (--max-header-count)"));
    if (!parser_->is_done() && idle()) {
      auto expect = h.find(bhttp::field::expect);
      if (expect != h.end() && beast::iequals(expect->value(), "100-continue"))
        write(std::make_shared<std::string>("HTTP/1.1 100 Continue\r\n\r\n"), [](bool) {});
    }
    if (parser_->is_done()) return on_request();
    bhttp::async_read(stream_, buf_, *parser_,
                      [self = this->shared_from_this()](beast::error_code ec, size_t) {
                        if (ec) return self->on_read_error(ec);
                        self->on_request();
                      });
  }

  void on_request() {
    disarm_read_timer();
    reading_ = false;
    auto msg = parser_->release();
    parser_.reset();
    Pending p;
    p.keep_alive = msg.keep_alive();
    p.http10 = msg.version() < 11;
    HttpRequest& r = p.request;
    r.method = std::string(msg.method_string());
    r.target = std::string(msg.target());
    r.path = r.target.substr(0, r.target.find('?'));
    for (const auto& f : msg) r.headers.emplace_back(f.name_string(), f.value());
    r.body = std::move(msg.body());
    r.request_id = sane_request_id(r.header("X-Request-Id")).value_or(new_request_id());
    r.remote = remote_;
    if (!p.keep_alive) read_closed_ = true;  // nothing more is read but EOF
    queue_.push_back(std::move(p));
    dispatch();
    if (read_closed_) return watch_eof();
    read_next();
  }

  // After the last request: keep one read pending to see the client leave.
  void watch_eof() {
    if (closed_ || reading_) return;
    reading_ = true;
    stream_.async_read_some(asio::buffer(scratch_),
                            [self = this->shared_from_this()](beast::error_code ec, size_t) {
                              self->reading_ = false;
                              if (ec) return self->on_read_error(ec);
                              self->watch_eof();
                            });
  }

  void on_read_error(beast::error_code ec) {
    reading_ = false;
    if (closed_) return;
    if (head_timed_out_ && ec == asio::error::operation_aborted)
      return wire_error(408, "request_timeout",
                        cat("request head and body not received within ",
                            srv_->opt.header_timeout_s, " s (--header-timeout-s)"));
    if (ec == bhttp::error::header_limit)
      return wire_error(
          431, "request_header_fields_too_large",
          cat("request header over ", srv_->opt.max_header_bytes, " bytes (--max-header-bytes)"));
    if (ec == bhttp::error::body_limit)
      return wire_error(
          413, "payload_too_large",
          cat("request body over ", srv_->opt.max_body_bytes, " bytes (--max-body-bytes)"));
    if (ec.category() == beast::error_code(bhttp::error::end_of_stream).category() &&
        ec != bhttp::error::end_of_stream && ec != bhttp::error::partial_message)
      return wire_error(400, "invalid_request", cat("malformed HTTP request: ", ec.message()));
    // EOF or a socket error: the client is gone; whatever runs for it ends.
    close();
  }

  void wire_error(int status, std::string_view code, std::string message) {
    disarm_read_timer();
    srv_->wire_errors.with({std::to_string(status)}).inc();
    read_closed_ = true;
    Pending p;
    p.request.request_id = new_request_id();
    p.request.method = "-";
    p.request.remote = remote_;
    p.keep_alive = false;
    p.preset = error_response(status, code, std::move(message));
    queue_.push_back(std::move(p));
    dispatch();
  }

  // Runs the queue's front request unless one is running.
  void dispatch();

  void finish(bool keep_alive) {
    busy_ = false;
    if (closed_) return;
    if (!keep_alive) {
      // After the response's last bytes have gone out.
      if (writing_ || !writes_.empty()) return void(close_when_written_ = true);
      return linger_close();
    }
    dispatch();
    if (busy_) return;
    if (read_closed_) return;
    if (!reading_) return read_next();
    if (waiting_first_byte_ && idle()) arm_read_timer(srv_->opt.idle_timeout_s, TimerMode::kIdle);
  }

  // Writes go out one at a time in order, each under the write deadline.
  void write(std::shared_ptr<std::string> data, std::function<void(bool)> done) {
    if (closed_) return done(false);
    writes_.emplace_back(std::move(data), std::move(done));
    if (!writing_) next_write();
  }
  void next_write() {
    if (writes_.empty() || closed_) return;
    writing_ = true;
    write_timer_.expires_after(seconds(srv_->opt.write_timeout_s));
    write_timer_.async_wait([self = this->shared_from_this()](beast::error_code ec) {
      if (ec) return;
      self->srv_->dropped.inc();
      base::logger("gateway")->info("HTTP client {} did not read for {} s: dropped", self->remote_,
                                    self->srv_->opt.write_timeout_s);
      self->close();
    });
    asio::async_write(stream_, asio::buffer(*writes_.front().first),
                      [self = this->shared_from_this()](beast::error_code ec, size_t) {
                        self->write_timer_.cancel();
                        self->writing_ = false;
                        auto done = std::move(self->writes_.front().second);
                        self->writes_.pop_front();
                        if (ec) self->close();
                        done(!ec);
                        if (ec) return;
                        if (!self->writes_.empty()) return self->next_write();
                        if (self->close_when_written_) self->linger_close();
                      });
  }

  // Half-closes, then reads what the client still sends for a moment, so a
  // refused body's unread bytes do not turn our close into a reset that
  // loses the error response.
  void linger_close() {
    if (closed_) return;
    read_closed_ = true;
    beast::error_code ec;
    beast::get_lowest_layer(stream_).shutdown(tcp::socket::shutdown_send, ec);
    arm_read_timer(1.0, TimerMode::kLinger);
    if (reading_) return;  // the pending read ends at EOF or the timer
    linger_close_read();
  }
  // Reads and drops what the client still sends until EOF, an error or the
  // linger timer.
  void linger_close_read() {
    reading_ = true;
    stream_.async_read_some(asio::buffer(scratch_),
                            [self = this->shared_from_this()](beast::error_code ec, size_t) {
                              self->reading_ = false;
                              if (ec) return self->close();
                              self->linger_close_read();
                            });
  }

  void close() {
    if (closed_) return;
    closed_ = true;
    gone_.store(true);
    disarm_read_timer();
    write_timer_.cancel();
    beast::error_code ec;
    beast::get_lowest_layer(stream_).close(ec);
    // Writes still queued fail; their Exchange sees alive() false. The one
    // in flight (the front) completes with an error by itself.
    const size_t keep = writing_ ? 1 : 0;
    while (writes_.size() > keep) {
      auto done = std::move(writes_.back().second);
      writes_.pop_back();
      done(false);
    }
  }

 public:
  std::string remote_;

 private:
  Impl* srv_;
  Stream stream_;
  asio::steady_timer read_timer_, write_timer_;
  const bool refuse_;
  const uint64_t id_;
  beast::flat_buffer buf_;
  std::optional<bhttp::request_parser<bhttp::string_body>> parser_;
  std::deque<Pending> queue_;
  std::deque<std::pair<std::shared_ptr<std::string>, std::function<void(bool)>>> writes_;
  std::array<char, 4096> scratch_{};
  TimerMode timer_mode_ = TimerMode::kIdle;
  uint64_t timer_gen_ = 0;
  bool busy_ = false, reading_ = false, writing_ = false, read_closed_ = false, closed_ = false;
  bool waiting_first_byte_ = false, head_timed_out_ = false, close_when_written_ = false;
  std::atomic<bool> gone_{false};
};

template <class Stream>
void Session<Stream>::dispatch() {
  if (busy_ || queue_.empty() || closed_) return;
  busy_ = true;
  disarm_read_timer_if_idle_wait();
  Pending p = std::move(queue_.front());
  queue_.pop_front();
  if (p.preset) {
    base::logger("gateway")->info("[{}] {} from {}: {}", p.request.request_id, p.preset->status,
                                  remote_, p.preset->error);
    write(std::make_shared<std::string>(
              serialize_response(*p.preset, p.request.request_id, false, false)),
          [self = this->shared_from_this()](bool) { self->finish(false); });
    return;
  }
  auto ex = std::make_shared<ConnectionExchange>(this->shared_from_this(), p.request.request_id,
                                                 p.request.method, p.request.path, p.keep_alive,
                                                 p.http10);
  asio::post(srv_->workers, [srv = srv_, ex, req = std::move(p.request)]() mutable {
    std::shared_ptr<Exchange> e = std::move(ex);
    try {
      srv->handler(req, e);
    } catch (const std::exception& err) {
      base::logger("gateway")->error("[{}] HTTP handler failed: {}", req.request_id, err.what());
      e->reply(error_response(500, "internal_error", "internal error"));
    }
  });
}

}  // namespace

void HttpServer::Impl::accept() {
  acceptor.async_accept(asio::make_strand(io), [this](beast::error_code ec, tcp::socket socket) {
    if (ec) {
      if (ec == asio::error::operation_aborted || stopping.load()) return;
      // Out of descriptors and the like: try again shortly, not in a spin.
      base::logger("gateway")->warn("HTTP accept: {}", ec.message());
      auto t = std::make_shared<asio::steady_timer>(io, std::chrono::milliseconds(50));
      t->async_wait([this, t](beast::error_code) { accept(); });
      return;
    }
    const bool refuse = open.load() >= opt.max_connections;
    if (tls)
      launch<asio::ssl::stream<tcp::socket>>(std::move(socket), refuse);
    else
      launch<tcp::socket>(std::move(socket), refuse);
    accept();
  });
}

template <class Stream>
void HttpServer::Impl::launch(tcp::socket socket, bool refuse) {
  beast::error_code ec;
  socket.set_option(tcp::no_delay(true), ec);
  std::string remote = "?";
  auto ep = socket.remote_endpoint(ec);
  if (!ec) remote = cat(ep.address().to_string(), ":", ep.port());
  std::shared_ptr<Session<Stream>> s;
  if constexpr (std::is_same_v<Stream, tcp::socket>)
    s = std::make_shared<Session<Stream>>(this, std::move(socket), refuse);
  else
    s = std::make_shared<Session<Stream>>(this, Stream(std::move(socket), *tls), refuse);
  s->remote_ = std::move(remote);
  s->run();
}

HttpServer::HttpServer(HttpServerOptions options, HttpHandler handler, MetricRegistry* metrics)
    : impl_(std::make_unique<Impl>(std::move(options), std::move(handler), metrics)) {}

HttpServer::~HttpServer() {
  stop();
}

StatusOr<std::string> HttpServer::start(const std::string& host, int port) {
  Impl& m = *impl_;
  if (m.started) return absl::FailedPreconditionError("HTTP server already started");
  if (!m.opt.tls_cert_file.empty() || !m.opt.tls_key_file.empty()) {
    if (m.opt.tls_cert_file.empty() || m.opt.tls_key_file.empty())
      return absl::InvalidArgumentError("--tls-cert and --tls-key go together");
    m.tls.emplace(asio::ssl::context::tls_server);
    beast::error_code ec;
    m.tls->set_options(asio::ssl::context::default_workarounds | asio::ssl::context::no_sslv2 |
                           asio::ssl::context::no_sslv3 | asio::ssl::context::no_tlsv1 |
                           asio::ssl::context::no_tlsv1_1 | asio::ssl::context::single_dh_use,
                       ec);
    m.tls->use_certificate_chain_file(m.opt.tls_cert_file, ec);
    if (ec)
      return absl::InvalidArgumentError(
          cat("--tls-cert ", m.opt.tls_cert_file, ": ", ec.message()));
    m.tls->use_private_key_file(m.opt.tls_key_file, asio::ssl::context::pem, ec);
    if (ec)
      return absl::InvalidArgumentError(cat("--tls-key ", m.opt.tls_key_file, ": ", ec.message()));
  }
  beast::error_code ec;
  auto addr = asio::ip::make_address(host, ec);
  if (ec) return absl::InvalidArgumentError(cat("HTTP: '", host, "' is not an IP address"));
  const tcp::endpoint ep(addr, static_cast<unsigned short>(port));
  m.acceptor.open(ep.protocol(), ec);
  if (!ec) m.acceptor.set_option(asio::socket_base::reuse_address(true), ec);
  if (!ec) m.acceptor.bind(ep, ec);
  if (!ec) m.acceptor.listen(asio::socket_base::max_listen_connections, ec);
  if (ec)
    return absl::UnavailableError(
        cat("HTTP: cannot listen on ", host, ":", port, ": ", ec.message()));
  const int bound = m.acceptor.local_endpoint().port();
  m.started = true;
  m.work.emplace(m.io.get_executor());
  m.accept();
  for (int i = 0; i < m.opt.io_threads; ++i) m.io_threads.emplace_back([&m] { m.io.run(); });
  const std::string h = host.find(':') != std::string::npos ? cat("[", host, "]") : host;
  return cat(h, ":", bound);
}

void HttpServer::stop() {
  Impl& m = *impl_;
  if (!m.started || m.stopped) return;
  m.stopped = true;
  m.stopping.store(true);
  asio::post(m.io, [&m] {
    beast::error_code ec;
    m.acceptor.close(ec);
  });
  std::vector<std::shared_ptr<SessionBase>> live;
  {
    // (Not shut under the lock: a session released here unregisters itself.)
    std::lock_guard<std::mutex> lk(m.mu);
    for (auto& [id, w] : m.sessions)
      if (auto s = w.lock()) live.push_back(std::move(s));
  }
  for (auto& s : live) s->shut();
  live.clear();
  // Handlers see alive() false and end; their last writes fail fast.
  m.workers.join();
  m.work.reset();
  m.io.stop();
  for (auto& t : m.io_threads) t.join();
}

}  // namespace k3::gateway
