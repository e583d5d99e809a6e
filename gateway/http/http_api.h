// The OpenAI-compatible HTTP API (cpp-httplib): /v1/chat/completions and
// /v1/completions (JSON or SSE), /v1/models, /health, /metrics. A thin
// adapter: JSON in and out via openai_json.h, the work in GatewayCore.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "gateway/core/gateway_core.h"

namespace httplib {
class Server;
}

namespace k3::gateway {

// Thread-safe; serves on its own threads between start() and stop().
class HttpApi {
 public:
  explicit HttpApi(GatewayCore* core);
  ~HttpApi();
  // Binds HOST:PORT (port 0: any free one) and starts serving; returns the
  // bound "HOST:PORT".
  StatusOr<std::string> start(const std::string& address);
  void stop();

 private:
  void routes();
  GatewayCore* core_;
  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
};

}  // namespace k3::gateway
