// The web chat page through the gateway's HTTP server over a scripted
// engined: served at / and /web/NAME (its libraries at /web/lib/NAME and
// KaTeX's fonts at /web/lib/fonts/NAME), open without an API key while the API
// still needs one, conditional GETs answered 304, and --no-web-ui (404).
#include "tests/gateway/fake_engine_fixture.h"

namespace k3::gateway {
namespace {

using namespace fake_engine;

TEST_F(GatewayOverFakeEngine, ServesThePageAndItsFiles) {
  httplib::Client c("127.0.0.1", port_);
  auto r = c.Get("/");
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200);
  EXPECT_EQ(r->get_header_value("Content-Type"), "text/html; charset=utf-8");
  EXPECT_EQ(r->get_header_value("Content-Security-Policy"), WebUi::kContentSecurityPolicy);
  EXPECT_NE(r->body.find("<script type=\"module\" src=\"/web/app.mjs\"></script>"),
            std::string::npos);
  const std::string etag = r->get_header_value("ETag");
  ASSERT_FALSE(etag.empty());

  auto js = c.Get("/web/markdown.mjs");
  ASSERT_TRUE(js);
  EXPECT_EQ(js->status, 200);
  EXPECT_EQ(js->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_NE(js->body.find("export class MarkdownRenderer"), std::string::npos);
  // The libraries, one route per folder of their names.
  auto marked = c.Get("/web/lib/marked.min.js");
  ASSERT_TRUE(marked);
  EXPECT_EQ(marked->status, 200);
  EXPECT_EQ(marked->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  EXPECT_NE(marked->body.find("marked - a markdown parser"), std::string::npos);
  auto font = c.Get("/web/lib/fonts/KaTeX_Main-Regular.woff2");
  ASSERT_TRUE(font);
  EXPECT_EQ(font->status, 200);
  EXPECT_EQ(font->get_header_value("Content-Type"), "font/woff2");
  EXPECT_EQ(font->body.substr(0, 4), "wOF2");
  EXPECT_EQ(font->get_header_value("Content-Security-Policy"), WebUi::kContentSecurityPolicy);
  auto css = c.Get("/web/style.css");
  ASSERT_TRUE(css);
  EXPECT_EQ(css->get_header_value("Content-Type"), "text/css; charset=utf-8");

  // Revalidation: 304, no body, and the connection still serves requests.
  auto same = c.Get("/", {{"If-None-Match", etag}});
  ASSERT_TRUE(same);
  EXPECT_EQ(same->status, 304);
  EXPECT_TRUE(same->body.empty());
  EXPECT_FALSE(same->has_header("Content-Length"));
  auto next = c.Get("/web/favicon.svg");
  ASSERT_TRUE(next);
  EXPECT_EQ(next->status, 200);
  EXPECT_EQ(next->get_header_value("Content-Type"), "image/svg+xml");

  for (const char* path : {"/web/nope.mjs", "/web/", "/web/a/b", "/index.html", "/web/lib/nope.js",
                           "/web/lib/", "/web/lib/fonts/a/b", "/web/lib/app.mjs",
                           "/web/fonts/KaTeX_Main-Regular.woff2", "/web/lib/../app.mjs"}) {
    auto missing = c.Get(path);
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 404) << path;
  }
  auto post = c.Post("/", "x", "text/plain");
  ASSERT_TRUE(post);
  EXPECT_EQ(post->status, 405);
}

class GatewayWithKeys : public GatewayOverFakeEngine {
  void configure(GatewayConfig& c) override {
    std::ofstream(tmp_.file("keys")) << "sk-web-key-1234567890\n";
    std::filesystem::permissions(tmp_.file("keys"), std::filesystem::perms(0600));
    c.api_keys_file = tmp_.file("keys");
  }
};

TEST_F(GatewayWithKeys, ThePageLoadsWithoutAKeyButTheApiNeedsOne) {
  httplib::Client c("127.0.0.1", port_);
  for (const char* path : {"/", "/web/app.mjs", "/web/style.css"}) {
    auto r = c.Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << path;
  }
  auto missing = c.Get("/web/nope");
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 404);
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 401);
  auto chat = post("/v1/chat/completions",
                   {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"stream", true}});
  ASSERT_TRUE(chat);
  EXPECT_EQ(chat->status, 401);
  // Only GET is open: other methods on the page's paths still need the key.
  auto put = c.Put("/", "x", "text/plain");
  ASSERT_TRUE(put);
  EXPECT_EQ(put->status, 401);
}

class GatewayWithoutWebUi : public GatewayOverFakeEngine {
  void configure(GatewayConfig& c) override { c.web_ui = false; }
};

TEST_F(GatewayWithoutWebUi, ThePageIs404) {
  httplib::Client c("127.0.0.1", port_);
  for (const char* path : {"/", "/web/app.mjs", "/web/index.html"}) {
    auto r = c.Get(path);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 404) << path;
    EXPECT_EQ(json::parse(r->body)["error"]["code"], "not_found");
  }
  auto models = c.Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(models->status, 200);
}

// The flag as the gateway's command line takes it, and --help shows it.
TEST(GatewayConfigWebUi, NoWebUiFlag) {
  for (bool off : {false, true}) {
    GatewayConfig config;
    CLI::App app;
    config.add_flags(app);
    std::vector<std::string> args = {"--model", "m"};
    if (off) args.push_back("--no-web-ui");
    std::reverse(args.begin(), args.end());
    app.parse(args);
    EXPECT_EQ(config.web_ui, !off);
    EXPECT_NE(config.summary().find(off ? "web_ui=off" : "web_ui=on"), std::string::npos);
    EXPECT_NE(app.help().find("--no-web-ui"), std::string::npos);
    EXPECT_NE(app.help().find("default: served"), std::string::npos);
  }
}

}  // namespace
}  // namespace k3::gateway
