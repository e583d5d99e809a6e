#include "gateway/http/http_api.h"

#include <httplib.h>
#include <sys/socket.h>

#include "gateway/http/openai_json.h"
#include "gateway/http/peer_watch.h"
#include "shared/base/log.h"

namespace k3::gateway {
namespace {

constexpr const char* kJson = "application/json";

void reply_error(httplib::Response& res, const Status& s) {
  res.status = http_status(s);
  res.set_content(dump_body(error_json(s)), kJson);
}

// OpenAI SDKs retry 429 after this many seconds.
void add_retry_after(httplib::Response& res, const Status& s) {
  if (s.code() == absl::StatusCode::kResourceExhausted) res.set_header("Retry-After", "1");
}

}  // namespace

HttpApi::HttpApi(GatewayCore* core) : core_(core), server_(std::make_unique<httplib::Server>()) {}

HttpApi::~HttpApi() {
  stop();
}

void HttpApi::stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

StatusOr<std::string> HttpApi::start(const std::string& address) {
  K3_ASSIGN_OR_RETURN(auto hp, split_host_port(address));
  const int threads = core_->config().http_threads;
  server_->new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
  server_->set_payload_max_length(core_->config().max_body_bytes);
  server_->set_read_timeout(30, 0);
  server_->set_write_timeout(30, 0);
  routes();
  // cpp-httplib 0.11 listens with a backlog of 5: a burst of clients would
  // find connections stalled or reset. Note the socket as it is created (its
  // default options kept) and enlarge the backlog once it is bound.
  int listen_fd = -1;
  server_->set_socket_options([&listen_fd](int fd) {
    listen_fd = fd;
    httplib::default_socket_options(fd);
  });
  int port = hp.second;
  if (port == 0) {
    port = server_->bind_to_any_port(hp.first);
    if (port < 0) return absl::UnavailableError(cat("HTTP: cannot bind ", address));
  } else if (!server_->bind_to_port(hp.first, port)) {
    return absl::UnavailableError(
        cat("HTTP: cannot bind ", address, " (in use, or not an address of this host)"));
  }
  server_->set_socket_options(httplib::default_socket_options);
  if (listen_fd >= 0) ::listen(listen_fd, SOMAXCONN);
  thread_ = std::thread([this] { server_->listen_after_bind(); });
  // stop() before the loop runs would be lost (httplib 0.11): wait for it.
  for (int i = 0; i < 5000 && !server_->is_running(); ++i)
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  const std::string host =
      hp.first.find(':') != std::string::npos ? cat("[", hp.first, "]") : hp.first;
  return cat(host, ":", port);
}

void HttpApi::routes() {
  GatewayCore* core = core_;
  auto& srv = *server_;
  auto log = logger("gateway");

  // Authentication for the API routes; /health and /metrics stay open for
  // probes and scrapers on the (loopback by default) listen address.
  srv.set_pre_routing_handler([core](const httplib::Request& req, httplib::Response& res) {
    if (!core->api_keys().enabled() || req.path.rfind("/v1/", 0) != 0)
      return httplib::Server::HandlerResponse::Unhandled;
    if (core->api_keys().check_bearer(req.get_header_value("Authorization")))
      return httplib::Server::HandlerResponse::Unhandled;
    res.set_header("WWW-Authenticate", "Bearer");
    reply_error(res, absl::UnauthenticatedError(
                         "missing or invalid API key: send 'Authorization: Bearer KEY'"));
    return httplib::Server::HandlerResponse::Handled;
  });

  srv.set_error_handler([](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    Status s;
    if (res.status == 404)
      s = absl::NotFoundError("no such route");
    else if (res.status == 413)
      s = payload_too_large("request body is over this server's limit");
    else if (res.status == 405)
      s = absl::InvalidArgumentError("method not allowed on this route");
    else
      s = absl::InvalidArgumentError(cat("HTTP error ", res.status));
    const int code = res.status;
    res.set_content(dump_body(error_json(s)), kJson);
    res.status = code;
  });

  srv.set_exception_handler(
      [log](const httplib::Request&, httplib::Response& res, std::exception_ptr ep) {
        std::string what = "unknown";
        try {
          if (ep) std::rethrow_exception(ep);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        log->error("HTTP handler failed: {}", what);
        reply_error(res, absl::InternalError("internal error"));
      });

  srv.Get("/health", [core](const httplib::Request&, httplib::Response& res) {
    HealthReport h = core->health();
    res.status = h.ok ? 200 : 503;
    res.set_content(h.detail.dump(), kJson);
  });

  srv.Get("/metrics", [core](const httplib::Request&, httplib::Response& res) {
    res.set_content(core->metrics().render(), std::string(Metrics::kContentType));
  });

  srv.Get("/v1/models", [core](const httplib::Request&, httplib::Response& res) {
    res.set_content(
        dump_body(models_json({{core->generator().model_name(), core->created(), "k3serve"}})),
        kJson);
  });

  // Both generation routes: parse, prepare, admit, then run (SSE or JSON).
  auto generate = [core](const httplib::Request& req, httplib::Response& res, bool chat) {
    const char* api = chat ? "chat" : "completion";
    Generator& gen = core->generator();
    bool stream = false, include_usage = false;
    // Either request type: its stream flags, then the prompt prepared.
    auto prepare = [&](auto call, auto prepare_fn) -> StatusOr<PreparedRequest> {
      if (!call.ok()) return call.status();
      stream = call->stream;
      include_usage = call->include_usage;
      return (gen.*prepare_fn)(*call);
    };
    StatusOr<PreparedRequest> prep =
        chat ? prepare(parse_chat_request(req.body), &Generator::prepare_chat)
             : prepare(parse_completion_request(req.body), &Generator::prepare_completion);
    auto ctx = std::make_shared<RequestContext>();
    ctx->id = Generator::new_id(chat ? "chatcmpl-" : "cmpl-");
    // The client going away (while queued or generating) ends the request.
    auto peer_alive = watch_peer(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
    ctx->alive = peer_alive;
    const int64_t created = static_cast<int64_t>(std::time(nullptr));
    const std::string model = gen.model_name();

    if (!stream || !prep.ok()) {
      auto result = core->serve(api, prep, *ctx, [](const OutputDelta&) { return true; });
      if (!result.ok()) {
        add_retry_after(res, result.status());
        reply_error(res, result.status());
      } else if (chat) {
        res.set_content(dump_body(chat_completion_json(ctx->id, created, model, result->message,
                                                       result->finish)),
                        kJson);
      } else {
        res.set_content(dump_body(completion_json(ctx->id, created, model, result->message.content,
                                                  result->finish)),
                        kJson);
      }
      return;
    }

    // SSE: headers go out now; the generation runs inside the provider.
    auto shared_prep = std::make_shared<PreparedRequest>(std::move(*prep));
    res.set_header("Cache-Control", "no-cache");
    res.set_header("X-Accel-Buffering", "no");
    res.set_chunked_content_provider(
        "text/event-stream", [core, chat, include_usage, ctx, shared_prep, created, model, api,
                              peer_alive](size_t, httplib::DataSink& sink) {
          bool first = true, gone = false;
          auto write = [&](const std::string& s) {
            if (gone) return false;
            if (!sink.write(s.data(), s.size())) gone = true;
            return !gone;
          };
          // While engined prefills nothing flows; an SSE comment now and then
          // finds out whether the client is still there.
          auto last_write = std::chrono::steady_clock::now();
          ctx->alive = [&] {
            if (gone || !peer_alive()) return false;
            const auto now = std::chrono::steady_clock::now();
            if (now - last_write < std::chrono::seconds(1)) return true;
            last_write = now;
            return write(": keep-alive\n\n");
          };
          auto result = core->serve(api, *shared_prep, *ctx, [&](const OutputDelta& d) {
            last_write = std::chrono::steady_clock::now();
            nlohmann::json j =
                chat ? chat_chunk_json(ctx->id, created, model, d, first)
                     : completion_chunk_json(ctx->id, created, model, d.content, std::nullopt);
            first = false;
            return write(sse_event(j));
          });
          if (!result.ok()) {
            if (!gone) {
              write(sse_event(error_json(result.status())));
              write(sse_done());
            }
          } else {
            const Finish& f = result->finish;
            if (chat && first)
              write(sse_event(chat_chunk_json(ctx->id, created, model, OutputDelta{}, true)));
            write(sse_event(chat ? chat_finish_chunk_json(ctx->id, created, model, f.reason)
                                 : completion_chunk_json(ctx->id, created, model, "", f.reason)));
            if (include_usage)
              write(sse_event(usage_chunk_json(ctx->id, created, model, f.usage, chat)));
            write(sse_done());
          }
          sink.done();
          ctx->alive = nullptr;  // it refers to this call's locals
          return true;
        });
  };
  srv.Post("/v1/chat/completions", [generate](const httplib::Request& req, httplib::Response& res) {
    generate(req, res, true);
  });
  srv.Post("/v1/completions", [generate](const httplib::Request& req, httplib::Response& res) {
    generate(req, res, false);
  });
}

}  // namespace k3::gateway
