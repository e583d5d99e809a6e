#include "gateway/http/web_ui.h"

#include <cstdint>
#include <cstdio>
#include <set>

#include "gateway/http/web_assets.h"
#include "gateway/http/wire_format.h"
#include "shared/base/hash.h"
#include "shared/status.h"

namespace k3::gateway {
namespace {

constexpr std::string_view kWebPrefix = "/web/";

std::string etag_of(std::string_view bytes) {
  uint64_t h = 0xcbf29ce484222325ull;  // FNV-1a 64: a content tag, not a security check
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ull;
  }
  return "\"" + base::hex64(h) + "\"";
}

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// If-None-Match: "*" or a comma-separated list of (possibly weak) tags.
bool none_match_hits(std::string_view header, std::string_view etag) {
  while (!header.empty()) {
    const size_t comma = header.find(',');
    std::string_view tag = trim(header.substr(0, comma));
    if (tag.substr(0, 2) == "W/") tag.remove_prefix(2);
    if (tag == "*" || tag == etag) return true;
    if (comma == std::string_view::npos) break;
    header.remove_prefix(comma + 1);
  }
  return false;
}

// The headers every answer of the page carries, errors too.
void add_security_headers(HttpResponse& r) {
  r.headers.emplace_back("Content-Security-Policy", std::string(WebUi::kContentSecurityPolicy));
  r.headers.emplace_back("X-Content-Type-Options", "nosniff");
  r.headers.emplace_back("X-Frame-Options", "DENY");
  r.headers.emplace_back("Referrer-Policy", "no-referrer");
}

}  // namespace

std::string WebUi::content_type(std::string_view name) {
  if (ends_with(name, ".html")) return "text/html; charset=utf-8";
  if (ends_with(name, ".css")) return "text/css; charset=utf-8";
  if (ends_with(name, ".mjs") || ends_with(name, ".js")) return "text/javascript; charset=utf-8";
  if (ends_with(name, ".svg")) return "image/svg+xml";
  if (ends_with(name, ".json")) return "application/json";
  if (ends_with(name, ".woff2")) return "font/woff2";
  return "application/octet-stream";
}

bool WebUi::is_web_path(std::string_view path) {
  return path == "/" || path.substr(0, kWebPrefix.size()) == kWebPrefix;
}

WebUi::WebUi() {
  for (const WebAsset& a : web_assets())
    files_.emplace(a.name, File{a.body, content_type(a.name), etag_of(a.body)});
}

HttpResponse WebUi::serve(std::string_view name, const HttpRequest& req) const {
  auto it = files_.find(name);
  if (it == files_.end()) {
    HttpResponse r = error_response(404, "not_found", cat("no page file '", name, "'"));
    add_security_headers(r);
    return r;
  }
  const File& f = it->second;
  HttpResponse r;
  add_security_headers(r);
  // Names carry no content hash: the browser asks again each load and gets
  // 304 while the gateway's build is the same.
  r.headers.emplace_back("Cache-Control", "no-cache");
  r.headers.emplace_back("ETag", f.etag);
  if (auto inm = req.header("If-None-Match"); inm && none_match_hits(*inm, f.etag)) {
    r.status = 304;
    r.content_type.clear();
    return r;
  }
  r.content_type = f.content_type;
  r.body = std::string(f.body);
  return r;
}

void WebUi::add_routes(Router& router) const {
  using Ex = std::shared_ptr<Exchange>;
  router.add("GET", "/", [this](const HttpRequest& req, const Ex& ex, const std::string&) {
    ex->reply(serve("index.html", req));
  });
  // A route's parameter is one path segment: one route per folder.
  std::set<std::string> folders;
  for (const auto& [name, file] : files_) {
    const size_t slash = name.rfind('/');
    folders.insert(slash == std::string_view::npos ? "" : std::string(name.substr(0, slash + 1)));
  }
  for (const std::string& folder : folders) {
    router.add("GET", cat(kWebPrefix, folder, "{name}"),
               [this, folder](const HttpRequest& req, const Ex& ex, const std::string& name) {
                 ex->reply(serve(folder + name, req));
               });
  }
}

}  // namespace k3::gateway
