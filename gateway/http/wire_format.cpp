#include "gateway/http/wire_format.h"

#include <random>

#include "gateway/core/json_text.h"
#include "gateway/core/status_codes.h"
#include "gateway/http/api_errors.h"

namespace k3::gateway {
namespace {

void append_clean(std::string& out, std::string_view v) {
  for (char c : v)
    if (c != '\r' && c != '\n') out.push_back(c);
}

}  // namespace

std::optional<std::string_view> HttpRequest::header(std::string_view name) const {
  for (const auto& [k, v] : headers) {
    if (k.size() != name.size()) continue;
    bool same = true;
    for (size_t i = 0; i < k.size() && same; ++i)
      same = std::tolower(static_cast<unsigned char>(k[i])) ==
             std::tolower(static_cast<unsigned char>(name[i]));
    if (same) return std::string_view(v);
  }
  return std::nullopt;
}

std::string_view reason_phrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 204:
      return "No Content";
    case 304:
      return "Not Modified";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 409:
      return "Conflict";
    case 413:
      return "Payload Too Large";
    case 415:
      return "Unsupported Media Type";
    case 429:
      return "Too Many Requests";
    case 431:
      return "Request Header Fields Too Large";
    case 499:
      return "Client Closed Request";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 504:
      return "Gateway Timeout";
    default:
      return "";
  }
}

std::string serialize_response(const HttpResponse& r, std::string_view request_id, bool keep_alive,
                               bool chunked, bool head_only) {
  std::string out = cat("HTTP/1.1 ", r.status, " ", reason_phrase(r.status), "\r\n");
  if (!r.content_type.empty()) {
    out += "Content-Type: ";
    append_clean(out, r.content_type);
    out += "\r\n";
  }
  for (const auto& [k, v] : r.headers) {
    append_clean(out, k);
    out += ": ";
    append_clean(out, v);
    out += "\r\n";
  }
  out += "X-Request-Id: ";
  append_clean(out, request_id);
  out += keep_alive ? "\r\nConnection: keep-alive\r\n" : "\r\nConnection: close\r\n";
  if (chunked) {
    out += "Transfer-Encoding: chunked\r\n\r\n";
    return out;
  }
  // A 304 has no body, and a Content-Length there would have to be the 200's.
  if (r.status == 304) return out + "\r\n";
  out += cat("Content-Length: ", r.body.size(), "\r\n\r\n");
  if (!head_only) out += r.body;
  return out;
}

std::string chunk_frame(std::string_view data) {
  char size[20];
  const int n = std::snprintf(size, sizeof size, "%zx\r\n", data.size());
  std::string out(size, static_cast<size_t>(n));
  out.append(data);
  out += "\r\n";
  return out;
}

HttpResponse error_response(int status, std::string_view code, std::string message,
                            std::string_view param) {
  HttpResponse r;
  r.status = status;
  r.error = message;
  Status s = with_http_code(absl::InvalidArgumentError(std::move(message)), status, code);
  if (!param.empty()) s = with_param(std::move(s), param);
  r.body = dump_body(error_json(s));
  return r;
}

std::string new_request_id() {
  static constexpr char kChars[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng(std::random_device{}());
  std::string s = "req-";
  for (int i = 0; i < 20; ++i) s.push_back(kChars[rng() % (sizeof kChars - 1)]);
  return s;
}

std::optional<std::string> sane_request_id(std::optional<std::string_view> v) {
  if (!v || v->empty() || v->size() > 64) return std::nullopt;
  for (char c : *v)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '_' && c != ':' &&
        c != '-')
      return std::nullopt;
  return std::string(*v);
}

}  // namespace k3::gateway
