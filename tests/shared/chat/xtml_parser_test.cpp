// shared/chat/xtml_parser.cpp: the output parser (streaming, truncation,
// malformed markup), and what the renderer writes read back.
#include "shared/chat/xtml_parser.h"

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "shared/chat/xtml_render.h"

namespace k3::chat {
namespace {

using nlohmann::ordered_json;

TEST(XtmlParser, ThinkThenResponse) {
  const ParsedMessage m = parse_output_text(
      "Let me think.<|close|>think<|sep|><|open|>response<|sep|>Hello!<|close|>response<|sep|>"
      "<|close|>message<|sep|><|end_of_msg|>",
      true);
  EXPECT_EQ(m.reasoning_content, "Let me think.");
  EXPECT_EQ(m.content, "Hello!");
  EXPECT_TRUE(m.tool_calls.empty());
  EXPECT_TRUE(m.ended);
}

TEST(XtmlParser, ThinkingOffStartsInResponse) {
  const ParsedMessage m = parse_output_text(
      "Hi there<|close|>response<|sep|><|close|>message<|sep|><|end_of_msg|>", false);
  EXPECT_EQ(m.reasoning_content, "");
  EXPECT_EQ(m.content, "Hi there");
  EXPECT_TRUE(m.ended);
}

TEST(XtmlParser, ToolCallsRebuildJsonArguments) {
  const ParsedMessage m = parse_output_text(
      "plan<|close|>think<|sep|><|open|>response<|sep|><|close|>response<|sep|>"
      "<|open|>tools<|sep|>"
      "<|open|>call tool=\"get_weather\" index=\"1\"<|sep|>"
      "<|open|>argument key=\"city\" type=\"string\"<|sep|>Par\"is\n<|close|>argument<|sep|>"
      "<|open|>argument key=\"days\" type=\"number\"<|sep|>3<|close|>argument<|sep|>"
      "<|open|>argument key=\"ok\" type=\"boolean\"<|sep|>true<|close|>argument<|sep|>"
      "<|open|>argument key=\"n\" type=\"null\"<|sep|>null<|close|>argument<|sep|>"
      "<|open|>argument key=\"o&quot;k\" type=\"object\"<|sep|>{\"b\": 1, \"a\": [1, \"é\"]}"
      "<|close|>argument<|sep|>"
      "<|open|>argument key=\"bad\" type=\"number\"<|sep|>abc<|close|>argument<|sep|>"
      "<|close|>call<|sep|>"
      "<|open|>call tool=\"raw\" index=\"2\"<|sep|><|open|>json type=\"object\"<|sep|>{not json"
      "<|close|>json<|sep|><|close|>call<|sep|>"
      "<|open|>call tool=\"now\" index=\"3\"<|sep|><|close|>call<|sep|>"
      "<|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>",
      true);
  EXPECT_EQ(m.reasoning_content, "plan");
  EXPECT_EQ(m.content, "");
  ASSERT_EQ(m.tool_calls.size(), 3u);
  EXPECT_EQ(m.tool_calls[0].name, "get_weather");
  EXPECT_EQ(m.tool_calls[0].arguments,
            "{\"city\": \"Par\\\"is\\n\", \"days\": 3, \"ok\": true, \"n\": null, "
            "\"o\\\"k\": {\"b\": 1, \"a\": [1, \"é\"]}, \"bad\": \"abc\"}");
  EXPECT_TRUE(nlohmann::json::accept(m.tool_calls[0].arguments));
  EXPECT_EQ(m.tool_calls[1], (ToolCall{"raw", "{not json"}));
  EXPECT_EQ(m.tool_calls[2], (ToolCall{"now", "{}"}));
  EXPECT_TRUE(m.ended);
}

TEST(XtmlParser, TruncationKeepsEverything) {
  ParsedMessage m = parse_output_text("I am thinking ab", true);
  EXPECT_EQ(m.reasoning_content, "I am thinking ab");
  EXPECT_FALSE(m.ended);
  // Cut inside a tag header: the header text is returned, not lost.
  m = parse_output_text("x<|close|>thi", true);
  EXPECT_EQ(m.reasoning_content, "xthi");
  // Cut inside an argument: the call keeps what it has, as valid JSON.
  m = parse_output_text(
      "<|close|>response<|sep|><|open|>tools<|sep|><|open|>call tool=\"f\" index=\"1\"<|sep|>"
      "<|open|>argument key=\"a\" type=\"number\"<|sep|>1<|close|>argument<|sep|>"
      "<|open|>argument key=\"city\" type=\"string\"<|sep|>Par",
      false);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, "{\"a\": 1, \"city\": \"Par\"}");
  EXPECT_FALSE(m.ended);
  // Cut right after the call opened.
  m = parse_output_text("<|open|>tools<|sep|><|open|>call tool=\"f\" index=\"1\"<|sep|>", false);
  ASSERT_EQ(m.tool_calls.size(), 1u);
  EXPECT_EQ(m.tool_calls[0].arguments, "{}");
}

TEST(XtmlParser, MalformedMarkupKeepsText) {
  // Unknown element: its text goes to the channel around it.
  ParsedMessage m =
      parse_output_text("<|open|>foo a=\"1\"<|sep|>bar<|close|>foo<|sep|> baz", false);
  EXPECT_EQ(m.content, "bar baz");
  // The model forgot to close think before opening response.
  m = parse_output_text("r<|open|>response<|sep|>c", true);
  EXPECT_EQ(m.reasoning_content, "r");
  EXPECT_EQ(m.content, "c");
  // Stray <|sep|>, a close tag of nothing open, text after the message.
  m = parse_output_text("a<|sep|>b<|close|>tools<|sep|>c<|close|>message<|sep|>tail", false);
  EXPECT_EQ(m.content, "abctail");
  // Two <|open|> in a row: the first header is returned as text.
  m = parse_output_text("<|open|>oops<|open|>think<|sep|>t", false);
  EXPECT_EQ(m.content, "oops");
  EXPECT_EQ(m.reasoning_content, "t");
  // An argument outside any call is an unknown element: its text is content.
  m = parse_output_text(
      "<|open|>argument key=\"k\" type=\"string\"<|sep|>v<|close|>argument<|sep|>", false);
  EXPECT_EQ(m.content, "v");
  EXPECT_TRUE(m.tool_calls.empty());
  // Input after <|end_of_msg|> is ignored; other special tokens are never shown.
  OutputParser p(false);
  p.feed_text("a", nullptr);
  p.feed_control(Control::kOther, nullptr);
  p.feed_text("b", nullptr);
  p.feed_control(Control::kEndOfMsg, nullptr);
  p.feed_text("after", nullptr);
  EXPECT_EQ(p.message().content, "ab");
  EXPECT_TRUE(p.done());
}

// Splits XTML text into control tokens and single characters.
void feed_char_by_char(std::string_view text, OutputParser* parser, ChatDelta* total,
                       std::vector<ChatDelta>* deltas) {
  static constexpr std::pair<std::string_view, Control> kTokens[] = {
      {kOpenToken, Control::kOpen},
      {kCloseToken, Control::kClose},
      {kSepToken, Control::kSep},
      {kEndOfMsgToken, Control::kEndOfMsg}};
  size_t i = 0;
  while (i < text.size()) {
    ChatDelta d;
    bool control = false;
    for (const auto& [token, c] : kTokens) {
      if (text.substr(i).starts_with(token)) {
        parser->feed_control(c, &d);
        i += token.size();
        control = true;
        break;
      }
    }
    if (!control) {
      size_t len = 1;
      while (i + len < text.size() && (static_cast<unsigned char>(text[i + len]) & 0xC0) == 0x80)
        ++len;
      parser->feed_text(text.substr(i, len), &d);
      i += len;
    }
    deltas->push_back(d);
  }
  ChatDelta d;
  parser->finish(&d);
  deltas->push_back(d);
  for (const ChatDelta& x : *deltas) {
    total->reasoning_content += x.reasoning_content;
    total->content += x.content;
  }
}

TEST(XtmlParser, StreamingDeltasAddUpToTheMessage) {
  const std::string output =
      "思考中…<|close|>think<|sep|><|open|>response<|sep|>Calling.<|close|>response<|sep|>"
      "<|open|>tools<|sep|><|open|>call tool=\"a\" index=\"1\"<|sep|>"
      "<|open|>argument key=\"x\" type=\"string\"<|sep|>1<|close|>argument<|sep|>"
      "<|open|>argument key=\"y\" type=\"array\"<|sep|>[1, 2]<|close|>argument<|sep|>"
      "<|close|>call<|sep|><|open|>call tool=\"b\" index=\"2\"<|sep|><|close|>call<|sep|>"
      "<|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>";
  OutputParser parser(true);
  ChatDelta total;
  std::vector<ChatDelta> deltas;
  feed_char_by_char(output, &parser, &total, &deltas);
  const ParsedMessage whole = parse_output_text(output, true);
  EXPECT_EQ(total.reasoning_content, whole.reasoning_content);
  EXPECT_EQ(total.content, whole.content);
  EXPECT_EQ(parser.message().tool_calls, whole.tool_calls);
  // Tool call deltas: the name first, then argument fragments in order.
  std::vector<ToolCall> rebuilt;
  for (const ChatDelta& d : deltas) {
    for (const ToolCallDelta& t : d.tool_calls) {
      if (t.name.has_value()) {
        ASSERT_EQ(t.index, rebuilt.size());
        rebuilt.push_back({*t.name, ""});
      }
      ASSERT_LT(t.index, rebuilt.size());
      rebuilt[t.index].arguments += t.arguments;
    }
  }
  EXPECT_EQ(rebuilt, whole.tool_calls);
  ASSERT_EQ(whole.tool_calls.size(), 2u);
  EXPECT_EQ(whole.tool_calls[0].arguments, "{\"x\": \"1\", \"y\": [1, 2]}");
  EXPECT_EQ(whole.reasoning_content, "思考中…");
}

// What the renderer writes for an assistant turn, the parser reads back.
TEST(XtmlParser, RoundTripsRenderedAssistantTurns) {
  const ordered_json request = ordered_json::parse(R"({
    "add_generation_prompt": false,
    "messages": [{"role": "assistant", "reasoning_content": "step 1\nstep 2",
                  "content": "Sure: \"quoted\" <b>",
                  "tool_calls": [
                    {"id": "1", "type": "function", "function": {"name": "f&\"g",
                     "arguments": "{\"s\": \"a\\\"b\", \"n\": -2.5e-7, \"o\": {\"z\": [true, null]}, \"u\": \"日本\"}"}},
                    {"id": "2", "type": "function", "function": {"name": "h", "arguments": ""}},
                    {"id": "3", "type": "function", "function": {"name": "j", "arguments": "oops{"}}]}]})");
  const Segments segments = *render_chat(request);
  // The model's part starts after <|open|>message role="assistant"<|sep|><|open|>think<|sep|>
  // (after the thinking-effort system message).
  size_t start = 0;
  while (segments[start].text != "assistant") ++start;
  int seps = 0;
  while (seps < 2) seps += segments[start++].text == "<|sep|>";
  Segments model_part(segments.begin() + static_cast<std::ptrdiff_t>(start), segments.end());
  const ParsedMessage m = parse_output_text(join_segments(model_part), true);
  EXPECT_EQ(m.reasoning_content, "step 1\nstep 2");
  EXPECT_EQ(m.content, "Sure: \"quoted\" <b>");
  ASSERT_EQ(m.tool_calls.size(), 3u);
  EXPECT_EQ(m.tool_calls[0].name, "f&\"g");
  EXPECT_EQ(nlohmann::json::parse(m.tool_calls[0].arguments),
            nlohmann::json::parse(
                R"({"s": "a\"b", "n": -2.5e-7, "o": {"z": [true, null]}, "u": "日本"})"));
  EXPECT_EQ(m.tool_calls[1].arguments, "{}");
  EXPECT_EQ(m.tool_calls[2].arguments, "oops{");
  EXPECT_TRUE(m.ended);
}

}  // namespace
}  // namespace k3::chat
