// POST /v1/responses on the real daemons (engined reading the tiny model's
// experts in-process, the gateway): for the same seed it generates exactly
// the tokens chat completions generate, thinking on and off; a limit ends it
// incomplete with its cut reasoning item; a streamed answer carries the same
// text as its final object.
#include <gtest/gtest.h>
#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "tests/gateway/stack_fixture.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

using json = nlohmann::json;
using testing::in_process;
using testing::ok_post;
using testing::Stack;

// The text of the output items of `type` ("reasoning" or "message").
std::string item_text(const json& response, const std::string& type) {
  std::string out;
  for (const json& item : response["output"])
    if (item["type"] == type)
      for (const json& part : item["content"]) out += part["text"].get<std::string>();
  return out;
}

TEST(ResponsesStack, TheSameSeedGivesChatCompletionsTokens) {
  Stack s(in_process());
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  for (const bool thinking : {false, true}) {
    SCOPED_TRACE(thinking ? "thinking (effort high)" : "thinking off");
    const json chat = ok_post(
        s, "/v1/chat/completions",
        {{"messages",
          {{{"role", "system"}, {"content", "Be brief."}}, {{"role", "user"}, {"content", "Hi"}}}},
         {"reasoning_effort", thinking ? "high" : "none"},
         {"max_tokens", 16},
         {"temperature", 1.2},
         {"seed", 99}});
    const json resp = ok_post(s, "/v1/responses",
                              {{"instructions", "Be brief."},
                               {"input", "Hi"},
                               {"reasoning", {{"effort", thinking ? "high" : "none"}}},
                               {"max_output_tokens", 16},
                               {"temperature", 1.2},
                               {"seed", 99}});
    const json& msg = chat["choices"][0]["message"];
    EXPECT_EQ(item_text(resp, "message"), msg["content"].is_null() ? "" : msg["content"]);
    EXPECT_EQ(item_text(resp, "reasoning"), msg.value("reasoning_content", ""));
    EXPECT_EQ(resp["usage"]["input_tokens"], chat["usage"]["prompt_tokens"]);
    EXPECT_EQ(resp["usage"]["output_tokens"], chat["usage"]["completion_tokens"]);
    // Both ran to the same end.
    EXPECT_EQ(resp["status"] == "incomplete", chat["choices"][0]["finish_reason"] == "length");
  }
}

TEST(ResponsesStack, ALimitEndsIncompleteWithTheCutReasoning) {
  Stack s(in_process());
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  const json r = ok_post(s, "/v1/responses", {{"input", "Hi"}, {"max_output_tokens", 3}});
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
  EXPECT_EQ(r["usage"]["output_tokens"], 3);
  ASSERT_GE(r["output"].size(), 1u) << r.dump();
  EXPECT_EQ(r["output"][0]["type"], "reasoning");
  EXPECT_EQ(r["output"].back()["status"], "incomplete");

  // Streamed: the deltas add up to the final object's text; the last event
  // is response.incomplete.
  auto sr = s.post("/v1/responses", {{"input", "Hi"},
                                     {"max_output_tokens", 12},
                                     {"reasoning", {{"effort", "none"}}},
                                     {"stream", true}});
  ASSERT_TRUE(sr);
  ASSERT_EQ(sr->status, 200) << sr->body;
  std::string deltas;
  json last;
  for (const json& e : testing::sse_chunks(sr->body)) {
    if (e["type"] == "response.output_text.delta") deltas += e["delta"].get<std::string>();
    last = e;
  }
  EXPECT_EQ(last["type"], "response.incomplete");
  EXPECT_EQ(item_text(last["response"], "message"), deltas);
  EXPECT_EQ(last["response"]["usage"]["output_tokens"], 12);
}

}  // namespace
}  // namespace k3
