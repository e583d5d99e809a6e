// shared/tokenizer/tokenizer.cpp: golden ids from the real tiktoken
// (tests/data/tokenizer/golden_tiny.json, written by @dqbd/tiktoken), special
// tokens, streaming decode, thread safety. The full cross-check against the
// npm packages (o200k_base included) is crosscheck.sh here.
#include "shared/tokenizer/tokenizer.h"

#include <thread>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "shared/tokenizer/utf8.h"
#include "tests/shared/tokenizer/tokenizer_test_util.h"

namespace k3::tokenizer {
namespace {

using k3::testing::read_file;
using testing::data_path;
using testing::error_of;
using testing::tiny;

// --- encoding ---

TEST(TokenizerGolden, MatchesRealTiktokenOnTinyVocab) {
  const nlohmann::json golden = nlohmann::json::parse(read_file(data_path("golden_tiny.json")));
  ASSERT_GE(golden["cases"].size(), 200u);
  size_t checked = 0;
  for (const auto& c : golden["cases"]) {
    const std::string text = c["text"];
    EXPECT_EQ(*tiny(SplitPattern::kKimi).encode(text), c["kimi"].get<std::vector<TokenId>>())
        << "kimi: " << text;
    EXPECT_EQ(*tiny(SplitPattern::kO200k).encode(text), c["o200k"].get<std::vector<TokenId>>())
        << "o200k: " << text;
    ++checked;
  }
  EXPECT_GE(checked, 200u);
}

TEST(TokenizerEncode, RoundTripsTheCorpusWithAndWithoutCache) {
  const nlohmann::json corpus = nlohmann::json::parse(read_file(data_path("corpus.json")));
  TokenizerOptions no_cache;
  no_cache.piece_cache = false;
  const Tokenizer uncached = *Tokenizer::load(data_path("tiny"), no_cache);
  for (const auto& s : corpus) {
    const std::string text = s;
    StatusOr<std::vector<TokenId>> ids = tiny().encode(text);
    ASSERT_TRUE(ids.ok()) << ids.status();
    EXPECT_EQ(*tiny().decode(*ids), text);
    EXPECT_EQ(*uncached.encode(text), *ids);
    EXPECT_EQ(*tiny().encode(text), *ids);  // second time from the cache
  }
}

TEST(TokenizerEncode, SpecialTokensOnlyInMarkup) {
  const Tokenizer& tok = tiny();
  const TokenId open = *tok.special_id("<|open|>");
  const TokenId end = *tok.special_id("<|end_of_msg|>");
  EXPECT_EQ(open, 3731);
  EXPECT_EQ(end, 3730);
  EXPECT_EQ(tok.eos_id(), end);
  EXPECT_EQ(tok.bos_id(), 3728);
  const std::string text = "<|open|>hi<|end_of_msg|>";
  std::vector<TokenId> ordinary = *tok.encode(text);
  for (TokenId id : ordinary) EXPECT_LT(id, tok.num_ranks());
  EXPECT_EQ(*tok.decode(ordinary), text);
  std::vector<TokenId> markup = *tok.encode_markup(text);
  std::vector<TokenId> want = {open};
  const std::vector<TokenId> hi = *tok.encode("hi");
  want.insert(want.end(), hi.begin(), hi.end());
  want.push_back(end);
  EXPECT_EQ(markup, want);
  // Reserved ids are special tokens too.
  EXPECT_EQ(tok.token_bytes(3800), "<|reserved_token_3800|>");
  EXPECT_EQ(*tok.encode_markup("<|reserved_token_3800|>"), std::vector<TokenId>{3800});
  EXPECT_EQ(tok.special_id("<|reserved_token_3733|>"), std::nullopt);  // 3733 is <|sep|>
}

TEST(TokenizerEncode, RefusesInvalidUtf8NamingTheOffset) {
  for (const auto& [text, offset] : std::vector<std::pair<std::string, size_t>>{
           {"ab\xff", 2}, {"\xc0\xaf", 0}, {"x\xed\xa0\x80", 1}, {"abc\xe4\xbd", 3}}) {
    StatusOr<std::vector<TokenId>> ids = tiny().encode(text);
    ASSERT_FALSE(ids.ok());
    EXPECT_CONTAINS(error_of(ids.status()),
                    "not valid UTF-8: ill-formed sequence at byte " + std::to_string(offset));
    EXPECT_FALSE(tiny().encode_markup(text).ok());
  }
}

// --- decoding ---

TEST(TokenizerDecode, RefusesIdsOutsideTheVocabulary) {
  EXPECT_CONTAINS(error_of(tiny().decode(std::vector<TokenId>{5, 3984}).status()),
                  "token id 3984 (position 1) is outside the vocabulary of 3984");
  EXPECT_FALSE(tiny().decode(std::vector<TokenId>{-1}).ok());
  EXPECT_EQ(*tiny().decode(std::vector<TokenId>{3983}), "<|reserved_token_3983|>");
}

TEST(TokenizerDecode, StreamDecoderHoldsBackSplitCharacters) {
  const Tokenizer& tok = tiny();
  const std::string text = "价格😀 and 東京タワー 👨‍👩‍👧 done";
  const std::vector<TokenId> ids = *tok.encode(text);
  StreamDecoder dec(tok);
  std::string out;
  bool held = false;
  for (TokenId id : ids) {
    std::string piece;
    ASSERT_TRUE(dec.feed(id, &piece).ok());
    EXPECT_FALSE(first_invalid_utf8(piece).has_value());  // always whole characters
    held = held || dec.pending() > 0;
    out += piece;
  }
  dec.finish(&out);
  EXPECT_EQ(out, text);
  EXPECT_TRUE(held) << "the tiny vocabulary splits CJK characters across tokens";

  // A split character cut by a special token, and one cut by the end.
  const std::vector<TokenId> smile = *tok.encode("😀");
  ASSERT_GT(smile.size(), 1u);
  StreamDecoder dec2(tok);
  std::string out2;
  ASSERT_TRUE(dec2.feed(smile[0], &out2).ok());
  EXPECT_EQ(out2, "");
  ASSERT_TRUE(dec2.feed(*tok.special_id("<|sep|>"), &out2).ok());
  EXPECT_EQ(out2, "\xEF\xBF\xBD<|sep|>");
  ASSERT_TRUE(dec2.feed(smile[0], &out2).ok());
  dec2.finish(&out2);
  EXPECT_EQ(out2, "\xEF\xBF\xBD<|sep|>\xEF\xBF\xBD");
  StreamDecoder skip(tok, StreamDecoder::Specials::kSkip);
  std::string out3;
  ASSERT_TRUE(skip.feed(*tok.special_id("<|open|>"), &out3).ok());
  EXPECT_EQ(out3, "");
  EXPECT_FALSE(skip.feed(99999, &out3).ok());
}

TEST(TokenizerConcurrency, ManyThreadsSameIds) {
  const nlohmann::json corpus = nlohmann::json::parse(read_file(data_path("corpus.json")));
  std::vector<std::string> texts;
  for (const auto& s : corpus) texts.push_back(s);
  TokenizerOptions no_cache;
  no_cache.piece_cache = false;
  const Tokenizer reference = *Tokenizer::load(data_path("tiny"), no_cache);
  std::vector<std::vector<TokenId>> want;
  for (const std::string& t : texts) want.push_back(*reference.encode(t));
  const Tokenizer shared = *Tokenizer::load(data_path("tiny"));  // one cache for all threads
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 5; ++round) {
        for (size_t i = 0; i < texts.size(); ++i) {
          const size_t k = (i * 7 + t * 13 + round) % texts.size();
          if (*shared.encode(texts[k]) != want[k]) ++mismatches[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (int m : mismatches) EXPECT_EQ(m, 0);
}

}  // namespace
}  // namespace k3::tokenizer
