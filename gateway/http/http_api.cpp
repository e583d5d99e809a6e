#include "gateway/http/http_api.h"

#include <ctime>

#include "gateway/core/json_text.h"
#include "gateway/core/random_id.h"
#include "gateway/core/status_codes.h"
#include "gateway/http/api_errors.h"
#include "gateway/http/chat_protocol.h"
#include "gateway/http/completion_protocol.h"
#include "gateway/http/messages_protocol.h"
#include "gateway/http/messages_route.h"
#include "gateway/http/model_list.h"
#include "gateway/http/request_fields.h"
#include "gateway/http/response_object.h"
#include "gateway/http/responses_serving.h"
#include "gateway/http/sse.h"
#include "gateway/http/wire_format.h"
#include "shared/base/host_port.h"
#include "shared/base/log.h"

namespace k3::gateway {
namespace {

using nlohmann::json;

HttpResponse json_response(const json& j, int status = 200) {
  HttpResponse r;
  r.status = status;
  r.body = dump_body(j);
  return r;
}

HttpResponse status_response(const Status& s) {
  HttpResponse r = error_response(http_status(s), error_code(s), msg(s), error_param(s));
  // OpenAI SDKs retry 429 after this many seconds.
  if (s.code() == absl::StatusCode::kResourceExhausted) r.headers.emplace_back("Retry-After", "1");
  if (s.code() == absl::StatusCode::kUnauthenticated)
    r.headers.emplace_back("WWW-Authenticate", "Bearer");
  return r;
}

// Adds the CORS headers to whatever the routes answer.
class CorsExchange final : public Exchange {
 public:
  CorsExchange(std::shared_ptr<Exchange> inner, std::string origin)
      : inner_(std::move(inner)), origin_(std::move(origin)) {}
  bool alive() const override { return inner_->alive(); }
  void reply(HttpResponse r) override { inner_->reply(decorate(std::move(r))); }
  bool start_stream(const HttpResponse& head) override {
    return inner_->start_stream(decorate(head));
  }
  bool write(std::string_view chunk) override { return inner_->write(chunk); }
  void end_stream() override { inner_->end_stream(); }

 private:
  HttpResponse decorate(HttpResponse r) const {
    r.headers.emplace_back("Access-Control-Allow-Origin", origin_);
    // A page may read whether the request deadline cut its reply.
    r.headers.emplace_back("Access-Control-Expose-Headers", "X-K3-Truncated, X-K3-Ignored-Fields");
    r.headers.emplace_back("Vary", "Origin");
    return r;
  }
  std::shared_ptr<Exchange> inner_;
  std::string origin_;
};

// A JSON object body (whatever its Content-Type), or why not.
StatusOr<nlohmann::ordered_json> object_body(const HttpRequest& req) {
  K3_ASSIGN_OR_RETURN(auto j, parse_json_text(req.body, ""));
  if (!j.is_object()) return absl::InvalidArgumentError("the request body must be a JSON object");
  return j;
}

}  // namespace

HttpServerOptions http_server_options(const GatewayConfig& c) {
  HttpServerOptions o;
  o.io_threads = c.http_io_threads;
  o.worker_threads = c.http_threads;
  o.max_header_bytes = c.max_header_bytes;
  o.max_header_count = c.max_header_count;
  o.max_body_bytes = c.max_body_bytes;
  o.max_connections = c.max_connections;
  o.header_timeout_s = c.header_timeout_s;
  o.idle_timeout_s = c.idle_timeout_s;
  o.write_timeout_s = c.write_timeout_s;
  o.tls_cert_file = c.tls_cert;
  o.tls_key_file = c.tls_key;
  return o;
}

HttpApi::HttpApi(GatewayCore* core) : core_(core) {
  add_routes();
  server_ = std::make_unique<HttpServer>(
      http_server_options(core->config()),
      [this](const HttpRequest& req, const std::shared_ptr<Exchange>& ex) { handle(req, ex); },
      &core->metrics());
}

HttpApi::~HttpApi() {
  stop();
}

void HttpApi::stop() {
  if (server_) server_->stop();
}

StatusOr<std::string> HttpApi::start(const std::string& address) {
  K3_ASSIGN_OR_RETURN(base::HostPort hp, base::parse_host_port(address));
  return server_->start(hp.host, hp.port);
}

// CORS preflight, then the API key, then the route.
void HttpApi::handle(const HttpRequest& req, const std::shared_ptr<Exchange>& raw) const {
  const GatewayConfig& c = core_->config();
  std::shared_ptr<Exchange> ex = raw;
  if (!c.cors_origin.empty()) {
    ex = std::make_shared<CorsExchange>(raw, c.cors_origin);
    if (req.method == "OPTIONS") {
      const std::string allow = router_.allowed(req.path);
      if (allow.empty()) return router_.route(req, ex);
      HttpResponse r;
      r.status = 204;
      r.content_type.clear();
      r.headers = {{"Access-Control-Allow-Methods", allow},
                   {"Access-Control-Allow-Headers",
                    "Authorization, Content-Type, X-Request-Id, x-api-key, anthropic-version, "
                    "anthropic-beta"},
                   {"Access-Control-Max-Age", "600"}};
      return ex->reply(std::move(r));
    }
  }
  // The page loads without a key (it holds nothing secret); its API calls
  // need one.
  const bool open = req.path == "/health" || (req.path == "/metrics" && c.metrics_public) ||
                    (req.method == "GET" && WebUi::is_web_path(req.path));
  // Anthropic's clients send the key as x-api-key; either header will do.
  const std::optional<std::string_view> x_api_key = req.header("x-api-key");
  if (core_->api_keys().enabled() && !open &&
      !core_->api_keys().check_bearer(req.header("Authorization").value_or("")) &&
      !(x_api_key && core_->api_keys().check_bearer(cat("Bearer ", *x_api_key)))) {
    const Status denied = absl::UnauthenticatedError(
        "missing or invalid API key: send 'Authorization: Bearer KEY' or 'x-api-key: KEY'");
    if (is_messages_path(req.path)) return ex->reply(messages_error_response(denied));
    return ex->reply(status_response(denied));
  }
  router_.route(req, ex);
}

void HttpApi::add_routes() {
  GatewayCore* core = core_;
  using Ex = std::shared_ptr<Exchange>;
  if (core->config().web_ui) {
    web_ui_ = std::make_unique<WebUi>();
    web_ui_->add_routes(router_);
  }

  router_.add("GET", "/health", [core](const HttpRequest& req, const Ex& ex, const std::string&) {
    HealthReport h = core->health();
    // With keys on, an anonymous probe learns only up or not.
    const bool detail = !core->api_keys().enabled() ||
                        core->api_keys().check_bearer(req.header("Authorization").value_or(""));
    ex->reply(
        json_response(detail ? h.detail : json{{"status", h.detail["status"]}}, h.ok ? 200 : 503));
  });

  router_.add("GET", "/metrics", [core](const HttpRequest&, const Ex& ex, const std::string&) {
    HttpResponse r;
    r.content_type = std::string(MetricRegistry::kContentType);
    r.body = core->metrics().render();
    ex->reply(std::move(r));
  });

  // Every name the model answers to, with the context engined and the model allow.
  auto entries = [core] {
    return model_entries(core->config().served_model_names, core->created(),
                         core->generator().max_context());
  };
  router_.add("GET", "/v1/models", [entries](const HttpRequest&, const Ex& ex, const std::string&) {
    ex->reply(json_response(models_json(entries())));
  });
  router_.add(
      "GET", "/v1/models/{id}",
      [core, entries](const HttpRequest&, const Ex& ex, const std::string& id) {
        if (Status s = core->generator().check_model(id); !s.ok() || id.empty())
          return ex->reply(
              status_response(s.ok() ? absl::NotFoundError("model '' does not exist") : s));
        for (const ModelEntry& m : entries())
          if (m.id == id) return ex->reply(json_response(model_json(m)));
        ex->reply(status_response(absl::NotFoundError(cat("model '", id, "' does not exist"))));
      });

  router_.add("POST", "/tokenize",
              [core](const HttpRequest& req, const Ex& ex, const std::string&) {
                auto body = object_body(req);
                if (!body.ok()) return ex->reply(status_response(body.status()));
                UnknownFields unknown = unknown_fields_for(core->config().strict_fields);
                if (Status s = check_request_fields("/tokenize", *body, unknown); !s.ok())
                  return ex->reply(status_response(s));
                auto it = body->find("content");
                if (it == body->end() || !it->is_string())
                  return ex->reply(
                      status_response(absl::InvalidArgumentError("'content' must be a string")));
                auto ids = core->generator().tokenizer().encode(it->get<std::string>());
                if (!ids.ok()) return ex->reply(status_response(ids.status()));
                HttpResponse r = json_response({{"tokens", *ids}});
                name_ignored_fields(req, unknown, r);
                ex->reply(std::move(r));
              });

  router_.add(
      "POST", "/detokenize", [core](const HttpRequest& req, const Ex& ex, const std::string&) {
        auto body = object_body(req);
        if (!body.ok()) return ex->reply(status_response(body.status()));
        UnknownFields unknown = unknown_fields_for(core->config().strict_fields);
        if (Status s = check_request_fields("/detokenize", *body, unknown); !s.ok())
          return ex->reply(status_response(s));
        auto it = body->find("tokens");
        if (it == body->end() || !it->is_array())
          return ex->reply(status_response(
              absl::InvalidArgumentError("'tokens' must be an array of token ids")));
        const auto& tok = core->generator().tokenizer();
        std::vector<int32_t> ids;
        for (size_t i = 0; i < it->size(); ++i) {
          const auto& v = (*it)[i];
          if (!v.is_number_integer() ||
              !tok.contains(v.get<int64_t>() > INT32_MAX ? -1
                                                         : static_cast<int32_t>(v.get<int64_t>())))
            return ex->reply(status_response(absl::InvalidArgumentError(
                cat("'tokens[", i, "]' is not a token id in [0, ", tok.vocab_size(), ")"))));
          ids.push_back(static_cast<int32_t>(v.get<int64_t>()));
        }
        auto text = tok.decode(ids);
        if (!text.ok()) return ex->reply(status_response(text.status()));
        HttpResponse r = json_response({{"content", *text}});
        name_ignored_fields(req, unknown, r);
        ex->reply(std::move(r));
      });

  router_.add(
      "POST", "/apply-template", [core](const HttpRequest& req, const Ex& ex, const std::string&) {
        UnknownFields unknown = unknown_fields_for(core->config().strict_fields);
        auto call = parse_chat_request(req.body, unknown);
        StatusOr<PreparedRequest> prep = call.ok() ? core->generator().prepare_chat(*call)
                                                   : StatusOr<PreparedRequest>(call.status());
        if (!prep.ok()) return ex->reply(status_response(prep.status()));
        auto text = core->generator().tokenizer().decode(prep->prompt_ids);
        if (!text.ok()) return ex->reply(status_response(text.status()));
        HttpResponse r = json_response({{"prompt", *text}, {"tokens", prep->prompt_ids}});
        name_ignored_fields(req, unknown, r);
        ex->reply(std::move(r));
      });

  router_.add("POST", "/v1/chat/completions",
              [this](const HttpRequest& req, const Ex& ex, const std::string&) {
                generate(req, ex, true);
              });
  router_.add("POST", "/v1/completions",
              [this](const HttpRequest& req, const Ex& ex, const std::string&) {
                generate(req, ex, false);
              });
  // OpenAI's Responses API on the same core (responses_serving.h).
  router_.add("POST", "/v1/responses",
              [core](const HttpRequest& req, const Ex& ex, const std::string&) {
                serve_responses(*core, req, ex);
              });
  // Nothing is stored (docs/responses-api.md): a stored response is never found.
  for (const char* method : {"GET", "DELETE"})
    router_.add(method, "/v1/responses/{id}",
                [](const HttpRequest&, const Ex& ex, const std::string& id) {
                  ex->reply(status_response(with_http_code(
                      absl::NotFoundError(cat("response '", id,
                                              "' not found: this server keeps no responses "
                                              "(send the whole conversation as input items)")),
                      404, "not_found")));
                });
  // Anthropic's Messages API (messages_route.h).
  add_messages_routes(router_, core);
}

// Parse, prepare, then GatewayCore::serve: as one JSON answer, or as SSE
// whose head and first chunk go out once the request is admitted or queued
// (an error before that is a plain HTTP error status, not 200 and an error
// event), then progress comments between the chunks (docs/openai-api.md).
void HttpApi::generate(const HttpRequest& req, const std::shared_ptr<Exchange>& ex,
                       bool chat) const {
  const char* api = chat ? "chat" : "completion";
  Generator& gen = core_->generator();
  bool stream = false, include_usage = false;
  auto prepare = [&](auto call, auto prepare_fn) -> StatusOr<PreparedRequest> {
    if (!call.ok()) return call.status();
    stream = call->stream;
    include_usage = call->include_usage;
    return (gen.*prepare_fn)(*call);
  };
  UnknownFields unknown = unknown_fields_for(core_->config().strict_fields);
  const StatusOr<PreparedRequest> prep =
      chat ? prepare(parse_chat_request(req.body, unknown), &Generator::prepare_chat)
           : prepare(parse_completion_request(req.body, unknown), &Generator::prepare_completion);
  RequestContext rc;
  rc.id = random_id(chat ? "chatcmpl-" : "cmpl-");
  rc.alive = Exchange::alive_fn(ex);
  const int64_t created = static_cast<int64_t>(std::time(nullptr));
  const std::string model = gen.model_name();

  if (!stream) {
    // The request deadline cuts the reply rather than losing it.
    rc.keep_partial_at_deadline = true;
    auto result = core_->serve(api, prep, rc, [&ex](const OutputDelta&) { return ex->alive(); });
    if (!result.ok()) return ex->reply(status_response(result.status()));
    HttpResponse r = json_response(
        chat ? chat_completion_json(rc.id, created, model, result->choices, result->usage)
             : completion_json(rc.id, created, model, result->choices, result->usage));
    if (result->truncated_at_deadline) r.headers.emplace_back("X-K3-Truncated", "deadline");
    name_ignored_fields(req, unknown, r);
    ex->reply(std::move(r));
    return;
  }

  // Chunks of the choices interleave, each naming its choice; each choice's
  // first chunk (the role in chat, "" in completions) goes out with the
  // head, its last carries the finish_reason.
  bool started = false;
  auto open_stream = [&] {
    if (started) return true;
    started = true;
    HttpResponse head;
    head.content_type = "text/event-stream";
    head.headers = {{"Cache-Control", "no-cache"}, {"X-Accel-Buffering", "no"}};
    name_ignored_fields(req, unknown, head);
    if (!ex->start_stream(head)) return false;
    for (int i = 0; i < prep->n; ++i) {
      OutputDelta d;
      d.index = i;
      if (!ex->write(sse_event(chat ? chat_chunk_json(rc.id, created, model, d, true)
                                    : completion_chunk_json(rc.id, created, model, "", std::nullopt,
                                                            std::nullopt, i))))
        return false;
    }
    return true;
  };
  auto send = [&](const json& j) { return open_stream() && ex->write(sse_event(j)); };
  rc.on_progress = [&](const ProgressNote& note) {
    const std::string comment = sse_progress_comment(note);
    return open_stream() && (comment.empty() || ex->write(comment));
  };
  auto result = core_->serve(api, prep, rc, [&](const OutputDelta& delta) {
    OutputDelta d = delta;
    d.finish.reset();
    if (!d.empty()) {
      json j = chat ? chat_chunk_json(rc.id, created, model, d, false)
                    : completion_chunk_json(rc.id, created, model, d.content, std::nullopt,
                                            d.logprobs, delta.index);
      if (!send(j)) return false;
    }
    if (!delta.finish) return true;
    return send(chat ? chat_finish_chunk_json(rc.id, created, model, *delta.finish, delta.index)
                     : completion_chunk_json(rc.id, created, model, "", *delta.finish, std::nullopt,
                                             delta.index));
  });
  if (!result.ok()) {
    if (!started) return ex->reply(status_response(result.status()));
    // What went out stays; the error follows it.
    if (ex->write(sse_event(error_json(result.status())))) ex->write(sse_done());
    return ex->end_stream();
  }
  // Usage: the prompt once, completion tokens over every choice.
  if (include_usage) send(usage_chunk_json(rc.id, created, model, result->usage, chat));
  open_stream();
  ex->write(sse_done());
  ex->end_stream();
}

}  // namespace k3::gateway
