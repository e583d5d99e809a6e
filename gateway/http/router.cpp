#include "gateway/http/router.h"

#include "gateway/http/wire_format.h"
#include "shared/status.h"

namespace k3::gateway {

void Router::add(std::string method, std::string pattern, Route route) {
  Entry e;
  e.method = std::move(method);
  const size_t brace = pattern.find('{');
  e.has_param = brace != std::string::npos;
  e.prefix = e.has_param ? pattern.substr(0, brace) : pattern;
  routes_.emplace_back(std::move(e), std::move(route));
}

bool Router::matches(const Entry& e, const std::string& path, std::string* param) const {
  if (!e.has_param) return path == e.prefix;
  if (path.size() <= e.prefix.size() || path.compare(0, e.prefix.size(), e.prefix) != 0)
    return false;
  *param = path.substr(e.prefix.size());
  return param->find('/') == std::string::npos;
}

std::string Router::allowed(const std::string& path) const {
  std::string out, param;
  for (const auto& [e, r] : routes_) {
    if (!matches(e, path, &param) || out.find(e.method) != std::string::npos) continue;
    if (!out.empty()) out += ", ";
    out += e.method;
    if (e.method == "GET") out += ", HEAD";
  }
  return out;
}

void Router::route(const HttpRequest& req, const std::shared_ptr<Exchange>& ex) const {
  std::string param;
  // HEAD runs the GET route; the exchange sends its head alone.
  const std::string& method = req.method == "HEAD" ? std::string("GET") : req.method;
  for (const auto& [e, r] : routes_)
    if (e.method == method && matches(e, req.path, &param)) return r(req, ex, param);
  const std::string allow = allowed(req.path);
  if (allow.empty()) return ex->reply(error_response(404, "not_found", cat("no route ", req.path)));
  HttpResponse res =
      error_response(405, "method_not_allowed", cat(req.method, " is not allowed on ", req.path));
  res.headers.emplace_back("Allow", allow);
  ex->reply(std::move(res));
}

}  // namespace k3::gateway
