#include "gateway/core/status_codes.h"

#include "absl/strings/cord.h"

namespace k3::gateway {

Status with_http_code(Status base, int http, std::string_view error_code) {
  base.SetPayload(absl::string_view(kHttpPayload.data(), kHttpPayload.size()),
                  absl::Cord(std::to_string(http)));
  base.SetPayload(absl::string_view(kErrorCodePayload.data(), kErrorCodePayload.size()),
                  absl::Cord(std::string(error_code)));
  return base;
}

Status with_param(Status base, std::string_view param) {
  base.SetPayload(absl::string_view(kParamPayload.data(), kParamPayload.size()),
                  absl::Cord(std::string(param)));
  return base;
}

std::string error_param(const Status& status) {
  auto payload = status.GetPayload(absl::string_view(kParamPayload.data(), kParamPayload.size()));
  return payload ? std::string(*payload) : std::string();
}

Status payload_too_large(std::string message) {
  Status s = absl::InvalidArgumentError(std::move(message));
  s.SetPayload(absl::string_view(kHttpPayload.data(), kHttpPayload.size()), absl::Cord("413"));
  return s;
}

int http_status(const Status& status) {
  if (auto payload =
          status.GetPayload(absl::string_view(kHttpPayload.data(), kHttpPayload.size()))) {
    const std::string text(*payload);
    int code = 0;
    for (const char c : text) {
      if (c < '0' || c > '9' || code > 999) {
        code = 0;
        break;
      }
      code = code * 10 + (c - '0');
    }
    if (code >= 400 && code <= 599) return code;
  }
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kOutOfRange:
    case absl::StatusCode::kFailedPrecondition:
      return 400;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kAborted:
      return 409;
    case absl::StatusCode::kResourceExhausted:
      return 429;
    case absl::StatusCode::kCancelled:
      return 499;  // nginx's "client closed request"
    case absl::StatusCode::kUnimplemented:
      return 501;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    default:
      return 500;
  }
}

std::string error_code(const Status& status) {
  if (auto payload =
          status.GetPayload(absl::string_view(kErrorCodePayload.data(), kErrorCodePayload.size())))
    return std::string(*payload);
  const int http = http_status(status);
  std::string_view code;
  if (http == 413) {
    code = "payload_too_large";
  } else {
    switch (status.code()) {
      case absl::StatusCode::kInvalidArgument:
        code = "invalid_argument";
        break;
      case absl::StatusCode::kOutOfRange:
        code = "context_length_exceeded";
        break;
      case absl::StatusCode::kFailedPrecondition:
        code = "failed_precondition";
        break;
      case absl::StatusCode::kUnauthenticated:
        code = "invalid_api_key";
        break;
      case absl::StatusCode::kPermissionDenied:
        code = "permission_denied";
        break;
      case absl::StatusCode::kNotFound:
        code = "model_not_found";
        break;
      case absl::StatusCode::kAborted:
        code = "aborted";
        break;
      case absl::StatusCode::kResourceExhausted:
        code = "rate_limit_exceeded";
        break;
      case absl::StatusCode::kCancelled:
        code = "cancelled";
        break;
      case absl::StatusCode::kUnimplemented:
        code = "not_implemented";
        break;
      case absl::StatusCode::kUnavailable:
        code = "service_unavailable";
        break;
      case absl::StatusCode::kDeadlineExceeded:
        code = "timeout";
        break;
      default:
        code = "internal_error";
        break;
    }
  }
  return std::string(code);
}

}  // namespace k3::gateway
