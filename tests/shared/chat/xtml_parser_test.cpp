// XTML: the golden renderings (tests/data/chat/golden.json, written by hand
// from K3_MODEL.md and CHAT_STRINGS.md), the refusals, the output parser
// (streaming, truncation, malformed markup), and the token-level glue.
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "shared/chat/python_compat.h"
#include "shared/chat/xtml_parser.h"
#include "shared/chat/xtml_render.h"
#include "shared/chat/xtml_tokens.h"
#include "shared/tokenizer/utf8.h"
#include "tests/test_util.h"

namespace k3::chat {
namespace {

using nlohmann::ordered_json;

#define EXPECT_CONTAINS(text, part)                                          \
  do {                                                                       \
    const std::string k3_text_ = (text);                                     \
    EXPECT_NE(k3_text_.find(part), std::string::npos) << "in: " << k3_text_; \
  } while (0)

std::string read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

const ordered_json& golden() {
  static const ordered_json g =
      ordered_json::parse(read(k3::testing::source_dir() + "/tests/data/chat/golden.json"));
  return g;
}

const Tokenizer& tiny() {
  static const Tokenizer t =
      *Tokenizer::load(k3::testing::source_dir() + "/tests/data/tokenizer/tiny");
  return t;
}

// The golden notation: "@open" etc. are markup, everything else text.
Segments expected_segments(const ordered_json& list) {
  Segments out;
  for (const auto& item : list) {
    const std::string s = item;
    if (s == "@open") {
      out.push_back({"<|open|>", true});
    } else if (s == "@close") {
      out.push_back({"<|close|>", true});
    } else if (s == "@sep") {
      out.push_back({"<|sep|>", true});
    } else if (s == "@eom") {
      out.push_back({"<|end_of_msg|>", true});
    } else {
      out.push_back({s, false});
    }
  }
  return out;
}

std::string show(const Segment& s) {
  return (s.markup ? "markup " : "text ") + ordered_json(s.text).dump();
}

RenderOptions options_of(const ordered_json& c) {
  RenderOptions o;
  if (c.contains("options"))
    o.developer_as_system = c["options"].value("developer_as_system", false);
  return o;
}

TEST(XtmlGolden, AtLeastThirtyConversations) {
  EXPECT_GE(golden()["cases"].size(), 30u);
  EXPECT_GE(golden()["errors"].size(), 20u);
}

TEST(XtmlGolden, RendersEveryCaseExactly) {
  for (const auto& c : golden()["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    StatusOr<Segments> got = render_chat(c["request"], options_of(c));
    ASSERT_TRUE(got.ok()) << got.status();
    const Segments want = expected_segments(c["expected"]);
    for (size_t i = 0; i < std::max(got->size(), want.size()); ++i) {
      if (i >= got->size() || i >= want.size() || (*got)[i] != want[i]) {
        ADD_FAILURE() << "segment " << i << ": got "
                      << (i < got->size() ? show((*got)[i]) : "(none)") << ", want "
                      << (i < want.size() ? show(want[i]) : "(none)");
        break;
      }
    }
  }
}

TEST(XtmlGolden, RefusesWithClearMessages) {
  for (const auto& c : golden()["errors"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    StatusOr<Segments> got = render_chat(c["request"], options_of(c));
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_CONTAINS(std::string(got.status().message()), c["error"].get<std::string>());
  }
}

TEST(XtmlGolden, EncodesSegmentBySegment) {
  const Tokenizer& tok = tiny();
  for (const auto& c : golden()["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const Segments segments = *render_chat(c["request"], options_of(c));
    StatusOr<std::vector<TokenId>> ids = encode_segments(tok, segments);
    ASSERT_TRUE(ids.ok()) << ids.status();
    std::vector<TokenId> want;
    for (const Segment& s : segments) {
      if (s.markup) {
        want.push_back(*tok.special_id(s.text));
      } else {
        const std::vector<TokenId> text_ids = *tok.encode(s.text);  // no BPE across segments
        want.insert(want.end(), text_ids.begin(), text_ids.end());
      }
    }
    EXPECT_EQ(*ids, want);
  }
}

TEST(XtmlTokens, EncodeRefusesBadSegments) {
  EXPECT_CONTAINS(std::string(encode_segments(tiny(), {{"<|nope|>", true}}).status().message()),
                  "segment 0: markup '<|nope|>' is not a special token");
  EXPECT_CONTAINS(
      std::string(encode_segments(tiny(), {{"ok", false}, {"\xff", false}}).status().message()),
      "segment 1: text is not valid UTF-8");
  // A user text that spells a control token stays ordinary text.
  const std::vector<TokenId> ids = *encode_segments(tiny(), {{"<|open|>", false}});
  for (TokenId id : ids) EXPECT_LT(id, tiny().num_ranks());
  tokenizer::TokenizerSpec spec;
  for (int b = 0; b < 256; ++b) spec.ranks.emplace_back(1, static_cast<char>(b));
  spec.vocab_size = 256;
  EXPECT_EQ(ControlIds::find(*Tokenizer::create(spec)).status().code(),
            absl::StatusCode::kNotFound);
}

// --- the output parser ---

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
  // The model's part starts after <|open|>message role="assistant"<|sep|><|open|>think<|sep|>.
  size_t start = 0;
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

TEST(XtmlTokens, OutputIdsStreamWholeCharacters) {
  const Tokenizer& tok = tiny();
  Segments output = {{"推理：東京", false},   {"<|close|>", true}, {"think", false},
                     {"<|sep|>", true},       {"<|open|>", true},  {"response", false},
                     {"<|sep|>", true},       {"答え😀", false},    {"<|close|>", true},
                     {"response", false},     {"<|sep|>", true},   {"<|open|>", true},
                     {"tools", false},        {"<|sep|>", true},   {"<|open|>", true},
                     {"call", false},         {" tool", false},    {"=\"", false},
                     {"search", false},       {"\"", false},       {"<|sep|>", true},
                     {"<|open|>", true},      {"argument", false}, {" key", false},
                     {"=\"", false},          {"q", false},        {"\"", false},
                     {" type", false},        {"=\"", false},      {"string", false},
                     {"\"", false},           {"<|sep|>", true},   {"café", false},
                     {"<|close|>", true},     {"argument", false}, {"<|sep|>", true},
                     {"<|close|>", true},     {"call", false},     {"<|sep|>", true},
                     {"<|close|>", true},     {"tools", false},    {"<|sep|>", true},
                     {"<|close|>", true},     {"message", false},  {"<|sep|>", true},
                     {"<|end_of_msg|>", true}};
  const std::vector<TokenId> ids = *encode_segments(tok, output);
  StatusOr<OutputTokenParser> parser = OutputTokenParser::create(tok, true);
  ASSERT_TRUE(parser.ok()) << parser.status();
  ChatDelta total;
  for (TokenId id : ids) {
    ChatDelta d;
    ASSERT_TRUE(parser->feed(id, &d).ok());
    EXPECT_FALSE(tokenizer::first_invalid_utf8(d.reasoning_content + d.content).has_value());
    EXPECT_EQ(d.content.find("<|"), std::string::npos);
    total.reasoning_content += d.reasoning_content;
    total.content += d.content;
  }
  parser->finish(nullptr);
  EXPECT_EQ(total.reasoning_content, "推理：東京");
  EXPECT_EQ(total.content, "答え😀");
  ASSERT_EQ(parser->message().tool_calls.size(), 1u);
  EXPECT_EQ(parser->message().tool_calls[0], (ToolCall{"search", "{\"q\": \"café\"}"}));
  EXPECT_TRUE(parser->message().ended);
  EXPECT_EQ(parse_output_ids(tok, ids, true)->tool_calls, parser->message().tool_calls);
  EXPECT_FALSE(parser->feed(1 << 20, nullptr).ok());
}

// --- Python compatibility ---

TEST(XtmlPythonCompat, FloatReprMatchesPython) {
  const std::pair<double, const char*> cases[] = {{1.0, "1.0"},
                                                  {1.5, "1.5"},
                                                  {-0.0, "-0.0"},
                                                  {0.1, "0.1"},
                                                  {1e16, "1e+16"},
                                                  {1e15, "1000000000000000.0"},
                                                  {0.0001, "0.0001"},
                                                  {0.00001, "1e-05"},
                                                  {1.5e-7, "1.5e-07"},
                                                  {123456789.125, "123456789.125"},
                                                  {1e100, "1e+100"},
                                                  {2.5e-300, "2.5e-300"},
                                                  {9999999999999998.0, "9999999999999998.0"},
                                                  {0.30000000000000004, "0.30000000000000004"},
                                                  {-1234.5678, "-1234.5678"}};
  for (const auto& [v, want] : cases) EXPECT_EQ(python_float_repr(v), want) << v;
}

TEST(XtmlPythonCompat, JsonDumpsStyles) {
  const ordered_json v = ordered_json::parse(
      R"({"b": [1, 2.0, "x\n\u0001\"\\/é😀"], "a": {"d": null, "c": true}, "é": -3})");
  EXPECT_EQ(dump_json(v, JsonStyle::kCompactSorted),
            "{\"a\":{\"c\":true,\"d\":null},\"b\":[1,2.0,\"x\\n\\u0001\\\"\\\\/é😀\"],\"é\":-3}");
  EXPECT_EQ(dump_json(v, JsonStyle::kSpacedOrdered),
            "{\"b\": [1, 2.0, \"x\\n\\u0001\\\"\\\\/é😀\"], \"a\": {\"d\": null, \"c\": true}, "
            "\"é\": -3}");
  EXPECT_EQ(dump_json(ordered_json::object(), JsonStyle::kSpacedOrdered), "{}");
  EXPECT_EQ(dump_json(ordered_json::array(), JsonStyle::kCompactSorted), "[]");
}

TEST(XtmlPythonCompat, StripAndBlank) {
  EXPECT_EQ(python_strip(" \t\n\u3000x y\u00a0\r\n"), "x y");
  EXPECT_EQ(python_strip("\u200bx"), "\u200bx");  // zero width space is not white space
  EXPECT_TRUE(is_blank(" \u2028\u0085\x1c"));
  EXPECT_FALSE(is_blank(" . "));
  EXPECT_TRUE(is_blank(""));
}

TEST(XtmlSegments, AttributeEscapingRoundTrips) {
  EXPECT_EQ(escape_attribute("a&b\"c<d>'"), "a&amp;b&quot;c<d>'");
  EXPECT_EQ(escape_attribute("&quot;"), "&amp;quot;");
  for (const char* s : {"a&b\"c", "&quot;", "&amp;&", "plain", ""}) {
    EXPECT_EQ(unescape_attribute(escape_attribute(s)), s);
  }
}

}  // namespace
}  // namespace k3::chat
