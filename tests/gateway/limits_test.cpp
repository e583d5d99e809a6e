// The gateway's per-request limits over a scripted engined: --max-tokens-limit
// refuses a larger max_tokens (400) and caps a request that gives none;
// --max-prompt-tokens refuses a longer prompt (413); each refusal is counted
// in k3_requests_refused_total{limit}.
#include "tests/gateway/fake_engine_fixture.h"

namespace k3::gateway::fake_engine {
namespace {

class GatewayWithLimits : public GatewayOverFakeEngine {
 protected:
  void configure(GatewayConfig& c) override {
    c.max_tokens_limit = 5;
    // Over the smallest chat prompt (the thinking-effort system message
    // alone is about 67 tokens).
    c.max_prompt_tokens = 200;
  }
  std::string metrics() {
    httplib::Client c("127.0.0.1", port_);
    auto r = c.Get("/metrics");
    EXPECT_TRUE(r);
    return r ? r->body : "";
  }
};

std::vector<int> ramp(int n) {
  std::vector<int> v;
  for (int i = 0; i < n; ++i) v.push_back(5 + (i * 37) % 3000);
  return v;
}

TEST_F(GatewayWithLimits, MaxTokensOverTheLimitIsRefusedAndNoneGivenIsCapped) {
  script("hello");
  auto r = post("/v1/completions", {{"prompt", ramp(4)}, {"max_tokens", 6}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  EXPECT_NE(r->body.find("over this server's limit of 5 tokens"), std::string::npos) << r->body;
  EXPECT_NE(metrics().find("k3_requests_refused_total{limit=\"max_tokens\"} 1"), std::string::npos)
      << metrics();
  r = post("/v1/completions", {{"prompt", ramp(4)}, {"max_tokens", 5}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  // A chat request without max_tokens gets the limit. (The completions API
  // has OpenAI's default of 16, which counts as asked.)
  r = post("/v1/chat/completions", {{"messages", {{{"role", "user"}, {"content", "hi"}}}}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 200) << r->body;
  std::lock_guard<std::mutex> lk(engine_.mu);
  EXPECT_EQ(engine_.last.max_tokens(), 5u) << "no max_tokens: the server's limit";
}

TEST_F(GatewayWithLimits, APromptOverTheLimitIsRefusedWith413) {
  auto r = post("/v1/completions", {{"prompt", ramp(201)}, {"max_tokens", 2}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 413) << r->body;
  EXPECT_NE(r->body.find("over this server's limit of 200 tokens"), std::string::npos) << r->body;
  EXPECT_NE(metrics().find("k3_requests_refused_total{limit=\"prompt_tokens\"} 1"),
            std::string::npos)
      << metrics();
}

}  // namespace
}  // namespace k3::gateway::fake_engine
