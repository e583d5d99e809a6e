// shared/chat/xtml_tokens.cpp: the token-level glue. Rendered segments
// encoded one by one (markup as special tokens), refusals, and the output
// parser fed token ids.
#include "shared/chat/xtml_tokens.h"

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "shared/chat/xtml_parser.h"
#include "shared/tokenizer/utf8.h"
#include "tests/shared/chat/xtml_test_util.h"

namespace k3::chat {
namespace {

using testing::golden;
using testing::options_of;
using testing::tiny;

TEST(XtmlGolden, EncodesSegmentBySegment) {
  const Tokenizer& tok = tiny();
  for (const auto& c : golden()["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    // The tiny tokenizer has no image placeholder token.
    if (c["expected"].dump().find("@image") != std::string::npos) continue;
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

}  // namespace
}  // namespace k3::chat
