// The web chat page's files as the gateway serves them (gateway/http/web_ui),
// without a network: every embedded file with its content type (the Debian
// libraries' under lib/ too), the strict CSP, ETag revalidation (304),
// unknown names 404.
#include "gateway/http/web_ui.h"

#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "gateway/http/web_assets.h"
#include "shared/status.h"

namespace k3::gateway {
namespace {

std::string header(const HttpResponse& r, const std::string& name) {
  for (const auto& [k, v] : r.headers)
    if (k == name) return v;
  return "";
}

HttpRequest get(const std::string& path) {
  HttpRequest req;
  req.method = "GET";
  req.target = req.path = path;
  return req;
}

TEST(WebUi, EmbedsThePageFiles) {
  std::set<std::string> names;
  for (const WebAsset& a : web_assets()) {
    names.insert(std::string(a.name));
    EXPECT_GT(a.body.size(), 0u) << a.name;
  }
  for (const char* n : {"index.html", "app.mjs", "markdown.mjs", "chat_api.mjs", "store.mjs",
                        "view.mjs", "export.mjs", "progress.mjs", "style.css", "favicon.svg"})
    EXPECT_TRUE(names.count(n)) << n;
  EXPECT_FALSE(names.count("embed.cmake"));
  EXPECT_FALSE(names.count("assets.cmake"));
}

// The libraries from Debian's packages (gateway/web/assets.cmake): marked,
// DOMPurify, highlight.js, KaTeX with its CSS and only its woff2 fonts, every
// font katex.min.css names in woff2 embedded where the CSS looks for it.
TEST(WebUi, EmbedsTheLibrariesAndKatexFonts) {
  std::set<std::string> names;
  for (const WebAsset& a : web_library_assets()) {
    names.insert(std::string(a.name));
    EXPECT_EQ(a.name.substr(0, 4), "lib/") << a.name;
  }
  for (const char* n : {"lib/marked.min.js", "lib/purify.min.js", "lib/highlight.min.js",
                        "lib/katex.min.js", "lib/katex.min.css"})
    EXPECT_TRUE(names.count(n)) << n;
  size_t fonts = 0;
  for (const std::string& n : names) {
    if (n.rfind("lib/fonts/", 0) != 0) continue;
    ++fonts;
    EXPECT_TRUE(n.size() > 6 && n.substr(n.size() - 6) == ".woff2") << n;
  }
  EXPECT_EQ(fonts, 20u);
  std::string css;
  for (const WebAsset& a : web_library_assets())
    if (a.name == "lib/katex.min.css") css = std::string(a.body);
  const std::regex url(R"(url\((fonts/[A-Za-z0-9_-]+\.woff2)\))");
  size_t named = 0;
  for (auto it = std::sregex_iterator(css.begin(), css.end(), url); it != std::sregex_iterator();
       ++it, ++named)
    EXPECT_TRUE(names.count("lib/" + (*it)[1].str())) << (*it)[1];
  EXPECT_EQ(named, 20u);
  // The page's files come first in web_assets(), then the libraries'.
  EXPECT_EQ(web_assets().size(), web_page_assets().size() + web_library_assets().size());
  EXPECT_EQ(web_assets()[web_page_assets().size()].name, web_library_assets()[0].name);
}

TEST(WebUi, IndexLoadsTheLibrariesBeforeThePage) {
  for (const WebAsset& a : web_page_assets()) {
    if (a.name != "index.html") continue;
    const std::string html(a.body);
    size_t last = 0;
    for (const char* src : {"/web/lib/marked.min.js", "/web/lib/purify.min.js",
                            "/web/lib/highlight.min.js", "/web/lib/katex.min.js", "/web/app.mjs"}) {
      const size_t at = html.find(cat("src=\"", src, "\""));
      ASSERT_NE(at, std::string::npos) << src;
      EXPECT_GT(at, last) << src << " loads out of order";
      last = at;
    }
    EXPECT_NE(html.find("href=\"/web/lib/katex.min.css\""), std::string::npos);
  }
}

TEST(WebUi, ServesEachFileWithItsTypeAndTheSecurityHeaders) {
  WebUi ui;
  for (const WebAsset& a : web_assets()) {
    HttpResponse r = ui.serve(a.name, get(std::string("/web/") + std::string(a.name)));
    EXPECT_EQ(r.status, 200) << a.name;
    EXPECT_EQ(r.body, a.body);
    EXPECT_EQ(r.content_type, WebUi::content_type(a.name));
    EXPECT_EQ(header(r, "Content-Security-Policy"), WebUi::kContentSecurityPolicy);
    EXPECT_EQ(header(r, "X-Content-Type-Options"), "nosniff");
    EXPECT_EQ(header(r, "Cache-Control"), "no-cache");
    EXPECT_EQ(header(r, "ETag").size(), 18u);
  }
  EXPECT_EQ(WebUi::content_type("index.html"), "text/html; charset=utf-8");
  EXPECT_EQ(WebUi::content_type("app.mjs"), "text/javascript; charset=utf-8");
  EXPECT_EQ(WebUi::content_type("style.css"), "text/css; charset=utf-8");
  EXPECT_EQ(WebUi::content_type("favicon.svg"), "image/svg+xml");
  EXPECT_EQ(WebUi::content_type("lib/marked.min.js"), "text/javascript; charset=utf-8");
  EXPECT_EQ(WebUi::content_type("lib/fonts/KaTeX_Main-Regular.woff2"), "font/woff2");
  EXPECT_EQ(WebUi::content_type("x.bin"), "application/octet-stream");
  // No inline script or style may run; fetch only to this origin.
  const std::string csp(WebUi::kContentSecurityPolicy);
  EXPECT_NE(csp.find("default-src 'none'"), std::string::npos);
  EXPECT_NE(csp.find("script-src 'self';"), std::string::npos);
  EXPECT_NE(csp.find("connect-src 'self';"), std::string::npos);
  EXPECT_NE(csp.find("font-src 'self';"), std::string::npos);
  EXPECT_EQ(csp.find("unsafe"), std::string::npos);
}

TEST(WebUi, IndexHasNoInlineScriptOrStyle) {
  for (const WebAsset& a : web_assets()) {
    if (a.name != "index.html") continue;
    const std::string html(a.body);
    size_t pos = 0;
    while ((pos = html.find("<script", pos)) != std::string::npos) {
      const size_t end = html.find('>', pos);
      EXPECT_NE(html.substr(pos, end - pos).find("src=\"/web/"), std::string::npos);
      EXPECT_EQ(html.compare(end + 1, 9, "</script>"), 0) << "inline script at " << pos;
      pos = end;
    }
    EXPECT_EQ(html.find("<style"), std::string::npos);
    EXPECT_EQ(html.find(" style="), std::string::npos);
    EXPECT_FALSE(std::regex_search(html, std::regex(R"(\son[a-z]+\s*=)")))
        << "an inline event handler";
  }
}

TEST(WebUi, RevalidatesByETag) {
  WebUi ui;
  HttpResponse first = ui.serve("app.mjs", get("/web/app.mjs"));
  const std::string etag = header(first, "ETag");
  HttpRequest again = get("/web/app.mjs");
  again.headers = {{"if-none-match", etag}};
  HttpResponse r = ui.serve("app.mjs", again);
  EXPECT_EQ(r.status, 304);
  EXPECT_TRUE(r.body.empty());
  EXPECT_TRUE(r.content_type.empty());
  EXPECT_EQ(header(r, "ETag"), etag);
  for (std::string v : {std::string("\"other\", W/") + etag, std::string("*")}) {
    again.headers = {{"If-None-Match", v}};
    EXPECT_EQ(ui.serve("app.mjs", again).status, 304) << v;
  }
  again.headers = {{"If-None-Match", "\"0000000000000000\""}};
  EXPECT_EQ(ui.serve("app.mjs", again).status, 200);
  // Another file's tag is not this one's.
  again.headers = {{"If-None-Match", header(ui.serve("style.css", get("/")), "ETag")}};
  EXPECT_EQ(ui.serve("app.mjs", again).status, 200);
}

TEST(WebUi, UnknownFilesAre404WithTheHeaders) {
  WebUi ui;
  for (const char* n : {"nope.js", "", "..", "index.html.bak", "embed.cmake"}) {
    HttpResponse r = ui.serve(n, get("/web/x"));
    EXPECT_EQ(r.status, 404) << n;
    EXPECT_EQ(header(r, "Content-Security-Policy"), WebUi::kContentSecurityPolicy);
  }
  EXPECT_TRUE(WebUi::is_web_path("/"));
  EXPECT_TRUE(WebUi::is_web_path("/web/app.mjs"));
  EXPECT_FALSE(WebUi::is_web_path("/v1/models"));
  EXPECT_FALSE(WebUi::is_web_path("/webx"));
  EXPECT_FALSE(WebUi::is_web_path(""));
}

}  // namespace
}  // namespace k3::gateway
