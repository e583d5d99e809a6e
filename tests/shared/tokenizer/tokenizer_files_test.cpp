// shared/tokenizer/tokenizer_files.cpp: validation of tiktoken.model,
// tokenizer_config.json, config.json and HuggingFace tokenizer.json, and the
// files mkmodel writes.
#include "shared/tokenizer/tokenizer_files.h"

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "shared/tokenizer/bpe.h"
#include "shared/tokenizer/tokenizer.h"
#include "tests/shared/tokenizer/tokenizer_test_util.h"
#include "tools/mkmodel/synthetic_tokenizer.h"

namespace k3::tokenizer {
namespace {

using k3::testing::read_file;
using testing::all_bytes_model;
using testing::data_path;
using testing::error_of;
using testing::tiny;

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
  EXPECT_CONTAINS(error_of(config("{not json")), "tokenizer_config.json: not valid JSON");

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
  k3::testing::write_file(dir.file("tiktoken.model"), read_file(data_path("tiny/tiktoken.model")));
  k3::testing::write_file(dir.file("tokenizer_config.json"),
                          read_file(data_path("tiny/tokenizer_config.json")));
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

TEST(TokenizerFiles, MkmodelFilesLoad) {
  StatusOr<tools::SyntheticTokenizer> files = tools::make_synthetic_tokenizer(600);
  ASSERT_TRUE(files.ok());
  TokenizerSpec spec;
  spec.ranks = *parse_tiktoken_model(files->tiktoken_model);
  ASSERT_TRUE(parse_tokenizer_config(files->tokenizer_config_json, &spec).ok());
  ASSERT_TRUE(settle_vocab_size(files->vocab_size, true, &spec).ok());
  const Tokenizer tok = *Tokenizer::create(spec);
  EXPECT_EQ(tok.num_ranks(), files->num_ranks);
  EXPECT_EQ(tok.special_id("<|close|>"), files->close_id);
  EXPECT_EQ(tok.special_id("<|sep|>"), files->sep_id);
  EXPECT_EQ(tok.eos_id(), files->eos_id);  // [EOS], as published
}

}  // namespace
}  // namespace k3::tokenizer
