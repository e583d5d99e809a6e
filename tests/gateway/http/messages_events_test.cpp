// The Messages stream's event sequence (gateway/http/messages_events.h).
#include "gateway/http/messages_events.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace k3::gateway {
namespace {

using nlohmann::json;

struct Event {
  std::string name;
  json data;
};

// The events of an SSE text; each event's name must match its data's type.
std::vector<Event> parse(const std::string& text) {
  std::vector<Event> out;
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t end = text.find("\n\n", pos);
    EXPECT_NE(end, std::string::npos) << text;
    if (end == std::string::npos) break;
    const std::string block = text.substr(pos, end - pos);
    pos = end + 2;
    const size_t nl = block.find('\n');
    EXPECT_EQ(block.rfind("event: ", 0), 0u) << block;
    EXPECT_EQ(block.compare(nl + 1, 6, "data: "), 0) << block;
    Event e{block.substr(7, nl - 7), json::parse(block.substr(nl + 7))};
    EXPECT_EQ(e.data["type"], e.name == "error" ? "error" : e.name);
    out.push_back(std::move(e));
  }
  return out;
}

std::vector<std::string> names(const std::vector<Event>& events) {
  std::vector<std::string> out;
  for (const Event& e : events) out.push_back(e.name);
  return out;
}

TEST(MessagesEvents, ThinkingTextAndToolUseBlocksInOrder) {
  MessagesEventWriter w("msg_1", "tiny");
  std::string text = w.start(12);
  OutputDelta d1;
  d1.reasoning_content = "hm";
  text += w.delta(d1);
  text += w.delta(d1);
  OutputDelta d2;
  d2.content = "Hi";
  text += w.delta(d2);
  OutputDelta d3;
  d3.tool_calls = {{0, "call_a", "f", "{\"x\":"}};
  text += w.delta(d3);
  OutputDelta d4;
  d4.tool_calls = {{0, "", "", "1}"}};
  text += w.delta(d4);
  OutputDelta d5;
  d5.tool_calls = {{1, "call_b", "g", ""}};
  text += w.delta(d5);
  Usage u;
  u.prompt_tokens = 12;
  u.cached_tokens = 2;
  u.completion_tokens = 5;
  text += w.finish(FinishReason::kToolCalls, std::nullopt, u);
  const auto ev = parse(text);
  EXPECT_EQ(
      names(ev),
      (std::vector<std::string>{
          "message_start", "content_block_start", "content_block_delta", "content_block_delta",
          "content_block_stop", "content_block_start", "content_block_delta", "content_block_stop",
          "content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
          "content_block_start", "content_block_stop", "message_delta", "message_stop"}));
  EXPECT_EQ(ev[0].data["message"]["usage"]["input_tokens"], 12);
  EXPECT_EQ(ev[0].data["message"]["content"], json::array());
  EXPECT_EQ(ev[1].data["content_block"],
            json::parse(R"({"type": "thinking", "thinking": "", "signature": ""})"));
  EXPECT_EQ(ev[2].data["delta"], json::parse(R"({"type": "thinking_delta", "thinking": "hm"})"));
  EXPECT_EQ(ev[5].data["index"], 1);
  EXPECT_EQ(ev[6].data["delta"], json::parse(R"({"type": "text_delta", "text": "Hi"})"));
  EXPECT_EQ(ev[8].data["content_block"],
            json::parse(R"({"type": "tool_use", "id": "call_a", "name": "f", "input": {}})"));
  EXPECT_EQ(ev[9].data["delta"],
            json::parse(R"({"type": "input_json_delta", "partial_json": "{\"x\":"})"));
  EXPECT_EQ(ev[10].data["index"], 2);
  EXPECT_EQ(ev[12].data["index"], 3);
  EXPECT_EQ(ev[12].data["content_block"]["id"], "call_b");
  EXPECT_EQ(ev[14].data["delta"],
            json::parse(R"({"stop_reason": "tool_use", "stop_sequence": null})"));
  EXPECT_EQ(ev[14].data["usage"]["input_tokens"], 10);
  EXPECT_EQ(ev[14].data["usage"]["cache_read_input_tokens"], 2);
  EXPECT_EQ(ev[14].data["usage"]["output_tokens"], 5);
  EXPECT_EQ(w.blocks(), 4);
}

TEST(MessagesEvents, StopSequenceAndAnEmptyReply) {
  MessagesEventWriter w("m", "tiny");
  const auto ev = parse(w.finish(FinishReason::kStop, std::string("END"), {}));
  EXPECT_EQ(names(ev), (std::vector<std::string>{"message_delta", "message_stop"}));
  EXPECT_EQ(ev[0].data["delta"]["stop_reason"], "stop_sequence");
  EXPECT_EQ(ev[0].data["delta"]["stop_sequence"], "END");
}

TEST(MessagesEvents, PingsCarryProgressAndErrorsTheirShape) {
  ProgressNote q;
  q.phase = ProgressNote::Phase::kQueued;
  q.queued = 2;
  auto ev = parse(MessagesEventWriter::ping(q));
  ASSERT_EQ(ev.size(), 1u);
  EXPECT_EQ(ev[0].name, "ping");
  EXPECT_EQ(ev[0].data["k3_progress"], json::parse(R"({"phase": "queued", "queued": 2})"));
  ProgressNote p;
  p.phase = ProgressNote::Phase::kPrefill;
  p.done = 5;
  p.total = 10;
  p.eta_s = 3.5;
  ev = parse(MessagesEventWriter::ping(p));
  EXPECT_EQ(ev[0].data["k3_progress"],
            json::parse(R"({"phase": "prefill", "done": 5, "total": 10, "eta_s": 3.5})"));
  ProgressNote a;
  a.phase = ProgressNote::Phase::kAdmitted;
  EXPECT_EQ(MessagesEventWriter::ping(a), "");
  ev = parse(MessagesEventWriter::error(absl::DeadlineExceededError("late")));
  EXPECT_EQ(ev[0].name, "error");
  EXPECT_EQ(ev[0].data["error"]["type"], "api_error");
  EXPECT_EQ(ev[0].data["error"]["message"], "late");
}

}  // namespace
}  // namespace k3::gateway
