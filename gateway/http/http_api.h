// The OpenAI-compatible HTTP API: the routes (/v1/chat/completions and
// /v1/completions as JSON or SSE, /v1/models[/{id}], /tokenize, /detokenize,
// /apply-template, /health, /metrics; Anthropic's /v1/messages through
// messages_route.h) as small functions over GatewayCore,
// the web chat page (web_ui.h) unless turned off, API keys and CORS in front
// of them, served by HttpServer. JSON in and out via chat_protocol.h,
// completion_protocol.h, model_list.h, api_errors.h and sse.h; generation
// through GatewayCore::serve.
// POST /v1/responses (OpenAI's Responses API) is served by responses_serving.h
// on the same core; GET and DELETE /v1/responses/{id} say nothing is stored.
#pragma once

#include <memory>
#include <string>

#include "gateway/core/gateway_core.h"
#include "gateway/http/http_server.h"
#include "gateway/http/router.h"
#include "gateway/http/web_ui.h"

namespace k3::gateway {

// Thread-safe; serves between start() and stop().
class HttpApi {
 public:
  explicit HttpApi(GatewayCore* core);
  ~HttpApi();
  // Binds HOST:PORT (port 0: any free one) with the config's limits and TLS;
  // returns the bound "HOST:PORT".
  StatusOr<std::string> start(const std::string& address);
  void stop();

 private:
  void handle(const HttpRequest& req, const std::shared_ptr<Exchange>& ex) const;
  void add_routes();
  void generate(const HttpRequest& req, const std::shared_ptr<Exchange>& ex, bool chat) const;

  GatewayCore* core_;
  std::unique_ptr<WebUi> web_ui_;  // null with --no-web-ui; the routes point into it
  Router router_;
  std::unique_ptr<HttpServer> server_;
};

// The HttpServerOptions a gateway config asks for.
HttpServerOptions http_server_options(const GatewayConfig& config);

}  // namespace k3::gateway
