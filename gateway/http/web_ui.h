// The web chat page at "/" (index.html) and its files at "/web/NAME" (the
// libraries' at "/web/lib/NAME", KaTeX's fonts at "/web/lib/fonts/NAME"),
// served from the assets embedded at build time (web_assets.h). Every answer
// carries a strict Content-Security-Policy (scripts, styles and fonts only
// from this origin, nothing inline, fetch only to this origin), nosniff and no
// framing; files
// are revalidated by ETag on every load (Cache-Control: no-cache), answered
// 304 when unchanged. The page itself needs no API key: its calls to the API
// do (the key is a setting of the page).
#pragma once

#include <string>
#include <string_view>
#include <unordered_map>

#include "gateway/http/http_message.h"
#include "gateway/http/router.h"

namespace k3::gateway {

// Immutable after construction: thread-safe.
class WebUi {
 public:
  static constexpr std::string_view kContentSecurityPolicy =
      "default-src 'none'; script-src 'self'; style-src 'self'; connect-src 'self'; "
      "img-src 'self'; font-src 'self'; base-uri 'none'; form-action 'none'; "
      "frame-ancestors 'none'";

  WebUi();

  // GET "/" and GET "/web/{name}", one route per folder of the embedded
  // names ("/web/lib/{name}", ...).
  void add_routes(Router& router) const;
  // The answer for GET of embedded file `name` ("lib/katex.min.js"; 404 for
  // one not embedded).
  HttpResponse serve(std::string_view name, const HttpRequest& req) const;

  // Whether `path` is one of the page's (open without an API key).
  static bool is_web_path(std::string_view path);
  // The Content-Type served for a file name, by its extension.
  static std::string content_type(std::string_view name);

 private:
  struct File {
    std::string_view body;
    std::string content_type;
    std::string etag;  // "\"<16 hex digits>\"": FNV-1a 64 of the bytes
  };
  std::unordered_map<std::string_view, File> files_;
};

}  // namespace k3::gateway
