// gateway/http/responses_events.h: the Responses event sequence for
// reasoning, text and tool calls, what a length cut and a failure send, and
// that the final response object holds the same items the events built.
#include "gateway/http/responses_events.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/gateway/http/protocol_test_support.h"

namespace k3::gateway {
namespace {

using nlohmann::json;

ResponseHead head() {
  return ResponseHead{"resp_1", 100, "k3", json{{"tools", json::array()}}};
}

OutputDelta reasoning(std::string text) {
  OutputDelta d;
  d.reasoning_content = std::move(text);
  return d;
}
OutputDelta content(std::string text) {
  OutputDelta d;
  d.content = std::move(text);
  return d;
}
OutputDelta call(size_t index, std::string id, std::string name, std::string args) {
  OutputDelta d;
  d.tool_calls.push_back({index, std::move(id), std::move(name), std::move(args)});
  return d;
}

// Runs the deltas through a builder and returns every event, in order.
std::vector<json> run(ResponseEvents& b, const std::vector<OutputDelta>& deltas,
                      FinishReason reason, const Usage& usage = {}, int64_t reasoning_tokens = 0) {
  std::vector<json> all = b.start();
  for (const OutputDelta& d : deltas)
    for (json& e : b.on_delta(d)) all.push_back(std::move(e));
  for (json& e : b.finish(reason, usage, reasoning_tokens)) all.push_back(std::move(e));
  return all;
}

std::vector<std::string> types(const std::vector<json>& events) {
  std::vector<std::string> out;
  for (const json& e : events) out.push_back(e["type"]);
  return out;
}

TEST(ResponseEvents, ReasoningThenTextSequence) {
  ResponseEvents b(head());
  Usage u;
  u.prompt_tokens = 7;
  u.completion_tokens = 4;
  const auto events = run(b, {reasoning("thi"), reasoning("nk"), content("Hel"), content("lo")},
                          FinishReason::kStop, u, /*reasoning_tokens=*/2);
  EXPECT_EQ(
      types(events),
      (std::vector<std::string>{
          "response.created", "response.in_progress", "response.output_item.added",
          "response.content_part.added", "response.reasoning_text.delta",
          "response.reasoning_text.delta", "response.reasoning_text.done",
          "response.content_part.done", "response.output_item.done", "response.output_item.added",
          "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
          "response.output_text.done", "response.content_part.done", "response.output_item.done",
          "response.completed"}));
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i]["sequence_number"], i);
  EXPECT_EQ(events[0]["response"]["status"], "in_progress");
  EXPECT_EQ(events[0]["response"]["output"], json::array());
  EXPECT_EQ(events[2]["item"]["type"], "reasoning");
  EXPECT_EQ(events[2]["output_index"], 0);
  EXPECT_EQ(events[4]["delta"], "thi");
  EXPECT_EQ(events[4]["item_id"], events[2]["item"]["id"]);
  EXPECT_EQ(events[6]["text"], "think");
  EXPECT_EQ(events[9]["item"]["type"], "message");
  EXPECT_EQ(events[9]["output_index"], 1);
  EXPECT_EQ(events[10]["part"]["type"], "output_text");
  EXPECT_EQ(events[13]["text"], "Hello");
  const json& done = events.back()["response"];
  EXPECT_EQ(done["status"], "completed");
  ASSERT_EQ(done["output"].size(), 2u);
  EXPECT_EQ(done["output"][0]["content"][0],
            json::parse(R"({"type":"reasoning_text","text":"think"})"));
  EXPECT_EQ(done["output"][0]["status"], "completed");
  EXPECT_EQ(done["output"][1]["content"][0]["text"], "Hello");
  EXPECT_EQ(done["output"][1]["role"], "assistant");
  EXPECT_EQ(done["usage"]["input_tokens"], 7);
  EXPECT_EQ(done["usage"]["output_tokens"], 4);
  EXPECT_EQ(done["usage"]["output_tokens_details"]["reasoning_tokens"], 2);
  // The non-streamed answer is the same object.
  EXPECT_EQ(b.response(), done);
}

TEST(ResponseEvents, FunctionCalls) {
  ResponseEvents b(head());
  const auto events = run(b,
                          {call(0, "call_a", "f", ""), call(0, "", "", "{\"x\":"),
                           call(0, "", "", "1}"), call(1, "call_b", "g", "{}")},
                          FinishReason::kToolCalls);
  EXPECT_EQ(types(events),
            (std::vector<std::string>{
                "response.created", "response.in_progress", "response.output_item.added",
                "response.function_call_arguments.delta", "response.function_call_arguments.delta",
                "response.function_call_arguments.done", "response.output_item.done",
                "response.output_item.added", "response.function_call_arguments.delta",
                "response.function_call_arguments.done", "response.output_item.done",
                "response.completed"}));
  EXPECT_EQ(events[2]["item"]["call_id"], "call_a");
  EXPECT_EQ(events[2]["item"]["name"], "f");
  EXPECT_EQ(events[2]["item"]["arguments"], "");
  EXPECT_EQ(events[5]["arguments"], "{\"x\":1}");
  const json out = b.response()["output"];
  ASSERT_EQ(out.size(), 2u);
  EXPECT_EQ(out[0]["type"], "function_call");
  EXPECT_EQ(out[0]["arguments"], "{\"x\":1}");
  EXPECT_EQ(out[1]["call_id"], "call_b");
  EXPECT_EQ(out[1]["status"], "completed");
  EXPECT_NE(out[0]["id"], out[1]["id"]);
}

TEST(ResponseEvents, LengthEndsIncomplete) {
  ResponseEvents b(head());
  const auto events = run(b, {reasoning("still thinking")}, FinishReason::kLength);
  EXPECT_EQ(events.back()["type"], "response.incomplete");
  const json& r = events.back()["response"];
  EXPECT_EQ(r["status"], "incomplete");
  EXPECT_EQ(r["incomplete_details"]["reason"], "max_output_tokens");
  // The cut reasoning item is there, marked incomplete.
  ASSERT_EQ(r["output"].size(), 1u);
  EXPECT_EQ(r["output"][0]["status"], "incomplete");
  EXPECT_EQ(r["output"][0]["content"][0]["text"], "still thinking");
}

TEST(ResponseEvents, FailureClosesTheResponse) {
  ResponseEvents b(head());
  b.start();
  b.on_delta(content("par"));
  const auto events = b.fail(absl::UnavailableError("engined went away"));
  EXPECT_EQ(types(events),
            (std::vector<std::string>{"response.output_text.done", "response.content_part.done",
                                      "response.output_item.done", "response.failed"}));
  const json& r = events.back()["response"];
  EXPECT_EQ(r["status"], "failed");
  EXPECT_EQ(r["error"]["code"], "service_unavailable");
  EXPECT_CONTAINS(r["error"]["message"].get<std::string>(), "engined went away");
  EXPECT_EQ(r["output"][0]["status"], "incomplete");
}

TEST(ResponseEvents, SseFraming) {
  const json e = {{"type", "response.completed"}, {"sequence_number", 3}};
  const std::string sse = responses_sse(e);
  EXPECT_EQ(sse.rfind("event: response.completed\ndata: {", 0), 0u) << sse;
  EXPECT_EQ(sse.substr(sse.size() - 2), "\n\n");
}

}  // namespace
}  // namespace k3::gateway
