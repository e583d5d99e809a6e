#include "gateway/http/api_errors.h"

#include <string>

#include "gateway/core/status_codes.h"

namespace k3::gateway {

using nlohmann::json;

json error_json(const Status& status) {
  const int http = http_status(status);
  const std::string param = error_param(status);
  return {{"error",
           {{"message", msg(status)},
            {"type", http < 500 ? "invalid_request_error" : "server_error"},
            {"param", param.empty() ? json(nullptr) : json(param)},
            {"code", error_code(status)}}}};
}

}  // namespace k3::gateway
