// The tokenizer: file validation, rank-BPE, golden ids from the real tiktoken
// (tests/data/tokenizer/golden_tiny.json, written by @dqbd/tiktoken), special
// tokens, streaming decode, thread safety. The full cross-check against the
// npm packages (o200k_base included) is tests/tokenizer/.
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "shared/tokenizer/bpe.h"
#include "shared/tokenizer/tokenizer.h"
#include "shared/tokenizer/tokenizer_files.h"
#include "shared/tokenizer/utf8.h"
#include "tests/test_util.h"
#include "tools/mkmodel/tokenizer_files.h"

namespace k3::tokenizer {
namespace {

// EXPECT that `text` contains `part` (gmock is not linked).
#define EXPECT_CONTAINS(text, part)                                          \
  do {                                                                       \
    const std::string k3_text_ = (text);                                     \
    EXPECT_NE(k3_text_.find(part), std::string::npos) << "in: " << k3_text_; \
  } while (0)

std::string data_path(const std::string& name) {
  return k3::testing::source_dir() + "/tests/data/tokenizer/" + name;
}

std::string read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

// The committed tiny vocabulary (a copy of mkmodel's), 256 reserved ids.
const Tokenizer& tiny(SplitPattern pattern = SplitPattern::kKimi) {
  auto load = [](SplitPattern p) {
    TokenizerOptions options;
    options.pattern = p;
    return *Tokenizer::load(data_path("tiny"), options);
  };
  static const Tokenizer kimi = load(SplitPattern::kKimi);
  static const Tokenizer o200k = load(SplitPattern::kO200k);
  return pattern == SplitPattern::kKimi ? kimi : o200k;
}

std::string error_of(const Status& s) {
  return std::string(s.message());
}

// --- files ---

TEST(TokenizerFiles, Base64) {
  EXPECT_EQ(base64_decode("AA=="), std::string(1, '\0'));
  EXPECT_EQ(base64_decode("aGk="), "hi");
  EXPECT_EQ(base64_decode("aGVsbG8gd29ybGQ="), "hello world");
  EXPECT_EQ(base64_decode("IQ=="), "!");
  EXPECT_EQ(base64_decode("4pyF"), "\xE2\x9C\x85");
  EXPECT_FALSE(base64_decode("").has_value());
  EXPECT_FALSE(base64_decode("AA=").has_value());
  EXPECT_FALSE(base64_decode("A===").has_value() && base64_decode("A===")->size() > 0);
  EXPECT_FALSE(base64_decode("AA=A").has_value());
  EXPECT_FALSE(base64_decode("a*==").has_value());
  EXPECT_FALSE(base64_decode("aGk").has_value());
}

std::string all_bytes_model() {
  std::string text;
  for (int b = 0; b < 256; ++b) {
    const std::string token(1, static_cast<char>(b));
    static constexpr char kA[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const auto u = static_cast<unsigned char>(b);
    text += kA[u >> 2];
    text += kA[(u & 3) << 4];
    text += "== " + std::to_string(b) + "\n";
  }
  return text;
}

TEST(TokenizerFiles, TiktokenModelErrorsNameTheLine) {
  const std::string good = all_bytes_model();
  EXPECT_TRUE(parse_tiktoken_model(good).ok());
  EXPECT_EQ(parse_tiktoken_model(good + "aGk= 256\n")->size(), 257u);

  auto err = [](const std::string& text) { return error_of(parse_tiktoken_model(text).status()); };
  EXPECT_CONTAINS(err(good + "a*== 256\n"), "tiktoken.model line 257: bad base64 'a*=='");
  EXPECT_CONTAINS(err(good + "aGk= 3\n"), "line 257: rank 3 is already given on line 4");
  EXPECT_CONTAINS(err(good + "aGk= 300\n"),
                  "ranks are not contiguous: no line gives rank 256 (257 ranks, the highest 300)");
  EXPECT_CONTAINS(err(good + "aGk=\n"), "line 257: expected 'BASE64 RANK'");
  EXPECT_CONTAINS(err(good + "aGk= 1 2\n"), "line 257: expected 'BASE64 RANK'");
  EXPECT_CONTAINS(err(good + "aGk= -4\n"), "line 257: bad rank '-4'");
  EXPECT_CONTAINS(err(good + "aGk= 99999999999999\n"), "line 257: bad rank");
  EXPECT_CONTAINS(err(""), "has no ranks");
  // CRLF line ends and a blank last line are fine.
  std::string crlf;
  for (char c : good) crlf += c == '\n' ? std::string("\r\n") : std::string(1, c);
  EXPECT_TRUE(parse_tiktoken_model(crlf + "\n").ok());
}

TEST(TokenizerFiles, RankTableRefusesDuplicatesAndMissingBytes) {
  std::vector<std::string> ranks = *parse_tiktoken_model(all_bytes_model());
  ranks.push_back("ab");
  ranks.push_back("ab");
  EXPECT_CONTAINS(error_of(RankTable::create(ranks).status()),
                  "ranks 256 and 257 have the same bytes");
  ranks.resize(255);  // byte 0xff missing
  EXPECT_CONTAINS(error_of(RankTable::create(ranks).status()), "lacks the single byte 0xff");
}

TEST(TokenizerFiles, TokenizerConfigValidation) {
  TokenizerSpec spec;
  spec.ranks = *parse_tiktoken_model(all_bytes_model());
  auto config = [&](const std::string& json) {
    TokenizerSpec s = spec;
    return parse_tokenizer_config(json, &s);
  };
  EXPECT_TRUE(
      config(R"({"added_tokens_decoder": {"256": {"content": "<|a|>", "special": true}}})").ok());
  EXPECT_CONTAINS(error_of(config(R"({"added_tokens_decoder": {"12": {"content": "<|a|>"}}})")),
                  "added token 12 '<|a|>' collides with rank 12 (there are 256 BPE ranks)");
  EXPECT_CONTAINS(error_of(config(R"({"added_tokens_decoder": {"x1": {"content": "<|a|>"}}})")),
                  "key 'x1' is not a token id");
  EXPECT_CONTAINS(error_of(config(R"({"added_tokens_decoder": {"300": {"special": true}}})")),
                  "added token 300 has no string 'content'");
  EXPECT_CONTAINS(
      error_of(config(
          R"({"added_tokens_decoder": {"300": {"content": "<|a|>"}, "301": {"content": "<|a|>"}}})")),
      "added tokens 300 and 301 have the same content '<|a|>'");
  EXPECT_CONTAINS(error_of(config("{not json")), "tokenizer_config.json is not valid JSON");

  TokenizerSpec s = spec;
  ASSERT_TRUE(parse_tokenizer_config(R"({"added_tokens_decoder": {"600": {"content": "<|z|>"}},
                                         "bos_token": "<|z|>", "eos_token": {"content": "<|z|>"}})",
                                     &s)
                  .ok());
  EXPECT_EQ(s.bos_token, "<|z|>");
  EXPECT_EQ(s.eos_token, "<|z|>");
  EXPECT_CONTAINS(error_of(settle_vocab_size(512, true, &s)),
                  "added token id 600 '<|z|>' is beyond vocab_size 512");
  EXPECT_CONTAINS(error_of(settle_vocab_size(100, true, &s)),
                  "vocab_size 100 is smaller than the 256 BPE ranks");
  ASSERT_TRUE(settle_vocab_size(std::nullopt, true, &s).ok());
  EXPECT_EQ(s.vocab_size, 601);  // past the highest added id
  ASSERT_TRUE(settle_vocab_size(std::nullopt, false, &spec).ok());
  EXPECT_EQ(spec.vocab_size, 256);
  ASSERT_TRUE(settle_vocab_size(std::nullopt, true, &spec).ok());
  EXPECT_EQ(spec.vocab_size, 256 + kKimiReservedSpecialIds);
}

TEST(TokenizerFiles, ConfigJsonVocabSize) {
  EXPECT_EQ(**vocab_size_from_config_json(R"({"text_config": {"vocab_size": 7}, "vocab_size": 9})"),
            7);
  EXPECT_EQ(**vocab_size_from_config_json(R"({"vocab_size": 9})"), 9);
  EXPECT_FALSE(vocab_size_from_config_json(R"({"x": 1})")->has_value());
  EXPECT_CONTAINS(error_of(vocab_size_from_config_json(R"({"vocab_size": -1})").status()),
                  "vocab_size must be a positive integer");
}

TEST(TokenizerFiles, ModelDirectoryUsesConfigVocabSize) {
  k3::testing::TempDir dir;
  k3::testing::write_file(dir.file("tiktoken.model"), read(data_path("tiny/tiktoken.model")));
  k3::testing::write_file(dir.file("tokenizer_config.json"),
                          read(data_path("tiny/tokenizer_config.json")));
  k3::testing::write_file(dir.file("config.json"), R"({"text_config": {"vocab_size": 4000}})");
  StatusOr<Tokenizer> tok = Tokenizer::load(dir.path());
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(tok->vocab_size(), 4000);
  EXPECT_EQ(tok->token_bytes(3999), "<|reserved_token_3999|>");
  k3::testing::write_file(dir.file("config.json"), R"({"vocab_size": 3000})");
  EXPECT_CONTAINS(error_of(Tokenizer::load(dir.path()).status()),
                  "vocab_size 3000 is smaller than the 3728 BPE ranks");
  k3::testing::write_file(dir.file("config.json"), R"({"vocab_size": 3731})");
  EXPECT_CONTAINS(error_of(Tokenizer::load(dir.path()).status()),
                  "added token id 3733 '<|sep|>' is beyond vocab_size 3731");
  EXPECT_CONTAINS(error_of(Tokenizer::load(dir.file("missing")).status()),
                  "no tokenizer file or directory");
}

// GPT-2's byte-level alphabet, the other way round (for writing tokenizer.json).
std::string byte_level(std::string_view bytes) {
  std::string out;
  for (char c : bytes) {
    const auto b = static_cast<unsigned char>(c);
    int cp = b;
    if (!((b >= 0x21 && b <= 0x7E) || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE)) {
      int n = 0;
      for (int x = 0; x < b; ++x) {
        if (!((x >= 0x21 && x <= 0x7E) || (x >= 0xA1 && x <= 0xAC) || x >= 0xAE)) ++n;
      }
      cp = 256 + n;
    }
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }
  return out;
}

TEST(TokenizerFiles, HuggingFaceTokenizerJsonMatchesTiktokenModel) {
  const Tokenizer& ref = tiny();
  nlohmann::json vocab = nlohmann::json::object();
  for (TokenId r = 0; r < ref.num_ranks(); ++r) vocab[byte_level(ref.token_bytes(r))] = r;
  vocab["<|open|>"] = 3731;  // HF lists added tokens in the vocab too
  nlohmann::json doc = {
      {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", nlohmann::json::array()}}},
      {"added_tokens",
       {{{"id", 3730}, {"content", "<|end_of_msg|>"}, {"special", true}},
        {{"id", 3731}, {"content", "<|open|>"}, {"special", true}}}}};
  k3::testing::TempDir dir;
  k3::testing::write_file(dir.file("tokenizer.json"), doc.dump());
  StatusOr<Tokenizer> hf = Tokenizer::load(dir.path());
  ASSERT_TRUE(hf.ok()) << hf.status();
  EXPECT_EQ(hf->num_ranks(), ref.num_ranks());
  EXPECT_EQ(hf->vocab_size(), 3732);
  for (const char* text : {"Hello world, it's 2024!", "你好，世界 😀", "  \r\n\tcode() {}"}) {
    EXPECT_EQ(*hf->encode(text), *ref.encode(text)) << text;
  }
  EXPECT_EQ(hf->special_id("<|open|>"), 3731);
  doc["model"]["vocab"]["\xE4\xBD\xA0"] = 9999;  // 你 is no byte-level token
  k3::testing::write_file(dir.file("tokenizer.json"), doc.dump());
  EXPECT_CONTAINS(error_of(Tokenizer::load(dir.file("tokenizer.json")).status()),
                  "is not a byte-level token");
}

// --- encoding ---

TEST(TokenizerGolden, MatchesRealTiktokenOnTinyVocab) {
  const nlohmann::json golden = nlohmann::json::parse(read(data_path("golden_tiny.json")));
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
  const nlohmann::json corpus = nlohmann::json::parse(read(data_path("corpus.json")));
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

TEST(TokenizerEncode, ScanAndHeapMergesAgree) {
  const nlohmann::json corpus = nlohmann::json::parse(read(data_path("corpus.json")));
  std::mt19937 rng(7);
  std::vector<TokenId> a, b;
  // Pieces of every length up to 600 bytes cut from the corpus, and random bytes.
  std::string all;
  for (const auto& s : corpus) all += s.get<std::string>();
  std::vector<std::string> pieces;
  for (int i = 0; i < 3000; ++i) {
    const size_t len = 1 + rng() % 600;
    pieces.push_back(all.substr(rng() % (all.size() - len), len));
  }
  for (int i = 0; i < 300; ++i) {
    std::string p(1 + rng() % 200, ' ');
    for (char& c : p) c = static_cast<char>(rng() % 4 == 0 ? rng() % 256 : "ab  th"[rng() % 6]);
    pieces.push_back(p);
  }
  pieces.push_back(std::string(5000, 'a'));
  const RankTable ranks =
      *RankTable::create(*parse_tiktoken_model(read(data_path("tiny/tiktoken.model"))));
  for (const std::string& p : pieces) {
    a.clear();
    b.clear();
    byte_pair_encode_scan(ranks, p, &a);
    byte_pair_encode_heap(ranks, p, &b);
    ASSERT_EQ(a, b) << "piece of " << p.size() << " bytes";
    std::string joined;
    for (TokenId id : a) joined += ranks.bytes(id);
    ASSERT_EQ(joined, p);
  }
}

// Tie-breaking and the "whole piece is a rank" rule on a hand-made vocabulary.
TEST(TokenizerEncode, RankBpeByHand) {
  std::vector<std::string> ranks;
  for (int b = 0; b < 256; ++b) ranks.emplace_back(1, static_cast<char>(b));
  ranks.push_back("bc");    // 256
  ranks.push_back("aa");    // 257
  ranks.push_back("ab");    // 258
  ranks.push_back("aaa");   // 259
  ranks.push_back("cd");    // 260
  ranks.push_back("abcd");  // 261: unreachable by merges (bc goes first: a|bc|d)
  const RankTable table = *RankTable::create(ranks);
  auto bpe = [&](std::string_view p) {
    std::vector<TokenId> out;
    byte_pair_encode(table, p, &out);
    return out;
  };
  // "aaa": pairs aa(0) and aa(1) tie at rank 257: the leftmost merges first,
  // then aa+a = aaa (259).
  EXPECT_EQ(bpe("aaa"), (std::vector<TokenId>{259}));
  EXPECT_EQ(bpe("aaaa"), (std::vector<TokenId>{257, 257}));  // aa|aa: aaa+a never forms
  EXPECT_EQ(bpe("aab"), (std::vector<TokenId>{257, 'b'}));   // aa (257) before ab (258)
  EXPECT_EQ(bpe("abcd"), (std::vector<TokenId>{'a', 256, 'd'}));
  TokenizerSpec spec;
  spec.ranks = ranks;
  spec.vocab_size = 262;
  const Tokenizer tok = *Tokenizer::create(spec);
  EXPECT_EQ(*tok.encode("abcd"), (std::vector<TokenId>{261}));  // the whole piece is a rank
  EXPECT_EQ(*tok.encode("abcda"), (std::vector<TokenId>{'a', 256, 'd', 'a'}));
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

TEST(Utf8, LossyDecodingSubstitutesMaximalSubparts) {
  auto lossy = [](std::string_view b) {
    std::string out;
    append_utf8_lossy(b, &out);
    return out;
  };
  const std::string r = "\xEF\xBF\xBD";
  EXPECT_EQ(lossy("a\x80"
                  "b"),
            "a" + r + "b");
  EXPECT_EQ(lossy("\xE4\xBD"), r);              // truncated 3-byte: one
  EXPECT_EQ(lossy("\xED\xA0\x80"), r + r + r);  // surrogate: ED A0 not a prefix
  EXPECT_EQ(lossy("\xF0\x9F\x98"), r);
  EXPECT_EQ(lossy("\xC0\xAF"), r + r);  // overlong lead
  EXPECT_EQ(lossy("\xF4\x90\x80\x80"), r + r + r + r);
  EXPECT_EQ(lossy("\xE4\xBD\xA0"), "\xE4\xBD\xA0");
  EXPECT_EQ(incomplete_utf8_tail("ab\xE4\xBD"), 2u);
  EXPECT_EQ(incomplete_utf8_tail("ab\xF0"), 1u);
  EXPECT_EQ(incomplete_utf8_tail("ab\xF0\x9F\x98"), 3u);
  EXPECT_EQ(incomplete_utf8_tail("ab\xF0\x9F\x98\x80"), 0u);
  EXPECT_EQ(incomplete_utf8_tail("ab\xED\xA0"), 0u);  // can never complete
  EXPECT_EQ(incomplete_utf8_tail("ab"), 0u);
  EXPECT_EQ(first_invalid_utf8("hello, 世界"), std::nullopt);
  EXPECT_EQ(first_invalid_utf8("0123456789\xF5"), 10u);
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
  const nlohmann::json corpus = nlohmann::json::parse(read(data_path("corpus.json")));
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

TEST(TokenizerFiles, MkmodelFilesLoad) {
  StatusOr<mkmodel::TokenizerFiles> files = mkmodel::make_tokenizer_files(600);
  ASSERT_TRUE(files.ok());
  TokenizerSpec spec;
  spec.ranks = *parse_tiktoken_model(files->tiktoken_model);
  ASSERT_TRUE(parse_tokenizer_config(files->tokenizer_config_json, &spec).ok());
  ASSERT_TRUE(settle_vocab_size(files->vocab_size, true, &spec).ok());
  const Tokenizer tok = *Tokenizer::create(spec);
  EXPECT_EQ(tok.num_ranks(), files->num_ranks);
  EXPECT_EQ(tok.special_id("<|close|>"), files->close_id);
  EXPECT_EQ(tok.special_id("<|sep|>"), files->sep_id);
  EXPECT_EQ(tok.eos_id(), files->end_of_msg_id);
}

}  // namespace
}  // namespace k3::tokenizer
