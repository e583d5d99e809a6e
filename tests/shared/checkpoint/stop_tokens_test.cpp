#include "shared/checkpoint/stop_tokens.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"

namespace k3::checkpoint {
namespace {

using json = nlohmann::json;
using tokenizer::TokenId;
using tokenizer::Tokenizer;
using tokenizer::TokenizerSpec;

constexpr TokenId kBos = 256, kEos = 257, kEndOfMsg = 258, kOpen = 259;

// 256 byte ranks, then Kimi's specials as the published snapshot places
// them after the ranks: [BOS], [EOS], <|end_of_msg|>, <|open|>; 300 ids.
// `eos_token` as tokenizer_config.json would name it (nullopt: it does not).
Tokenizer make_tokenizer(std::optional<std::string> eos_token, bool with_end_of_msg = true) {
  TokenizerSpec spec;
  for (int b = 0; b < 256; ++b) spec.ranks.push_back(std::string(1, static_cast<char>(b)));
  spec.added[kBos] = {"[BOS]", true};
  spec.added[kEos] = {"[EOS]", true};
  if (with_end_of_msg) spec.added[kEndOfMsg] = {"<|end_of_msg|>", true};
  spec.added[kOpen] = {"<|open|>", true};
  spec.vocab_size = 300;
  spec.bos_token = "[BOS]";
  spec.eos_token = std::move(eos_token);
  auto tok = Tokenizer::create(spec);
  EXPECT_TRUE(tok.ok()) << tok.status();
  return *std::move(tok);
}

// The published layout: <|end_of_msg|> in config.json (root and
// text_config), [EOS] as the tokenizer's eos_token.
StopTokenFiles published() {
  StopTokenFiles f;
  f.config_json = json({{"model_type", "kimi_k3"},
                        {"bos_token_id", kBos},
                        {"eos_token_id", kEndOfMsg},
                        {"text_config", {{"vocab_size", 300}, {"eos_token_id", kEndOfMsg}}}})
                      .dump();
  f.tokenizer_config_json = json({{"bos_token", "[BOS]"}, {"eos_token", "[EOS]"}}).dump();
  return f;
}

std::vector<int32_t> ids(const StatusOr<StopTokens>& s) {
  EXPECT_TRUE(s.ok()) << s.status();
  return s.ok() ? s->ids : std::vector<int32_t>{-1};
}

std::string error(const StatusOr<StopTokens>& s) {
  EXPECT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(s.status().message());
}

TEST(StopTokens, PublishedLayoutStopsOnEosAndEndOfMsg) {
  const Tokenizer tok = make_tokenizer("[EOS]");
  const StatusOr<StopTokens> s = stop_tokens(published(), &tok);
  EXPECT_EQ(ids(s), (std::vector<int32_t>{kEos, kEndOfMsg}));
  EXPECT_TRUE(s->contains(kEos));
  EXPECT_TRUE(s->contains(kEndOfMsg));
  EXPECT_FALSE(s->contains(kBos));
  EXPECT_EQ(s->summary(), "257, 258");
}

TEST(StopTokens, UnionOfEverySource) {
  const Tokenizer tok = make_tokenizer("[EOS]");
  StopTokenFiles f;
  // An id at the root, a list in text_config, a list in generation_config.json.
  f.config_json =
      json({{"eos_token_id", 5}, {"text_config", {{"vocab_size", 300}, {"eos_token_id", {7, 6}}}}})
          .dump();
  f.generation_config_json = json({{"eos_token_id", {9, 5, kEndOfMsg}}}).dump();
  EXPECT_EQ(ids(stop_tokens(f, &tok)), (std::vector<int32_t>{5, 6, 7, 9, kEos, kEndOfMsg}));
  // An id (not a list) in generation_config.json; config.json without text_config.
  f.config_json = json({{"vocab_size", 300}, {"eos_token_id", {3}}}).dump();
  f.generation_config_json = json({{"eos_token_id", 4}}).dump();
  EXPECT_EQ(ids(stop_tokens(f, &tok)), (std::vector<int32_t>{3, 4, kEos, kEndOfMsg}));
}

TEST(StopTokens, MissingSourcesAddNothing) {
  // No files: the tokenizer's eos (set from its own config) and <|end_of_msg|>.
  const Tokenizer tok = make_tokenizer("[EOS]");
  EXPECT_EQ(ids(stop_tokens({}, &tok)), (std::vector<int32_t>{kEos, kEndOfMsg}));
  // A tokenizer that names no eos_token: <|end_of_msg|> and the config's.
  const Tokenizer no_eos = make_tokenizer(std::nullopt);
  StopTokenFiles f = published();
  f.tokenizer_config_json = json({{"bos_token", "[BOS]"}}).dump();
  EXPECT_EQ(ids(stop_tokens(f, &no_eos)), std::vector<int32_t>{kEndOfMsg});
  // Keys absent or null; a tokenizer without <|end_of_msg|>.
  const Tokenizer plain = make_tokenizer(std::nullopt, /*with_end_of_msg=*/false);
  f.config_json = json({{"vocab_size", 300}, {"eos_token_id", nullptr}}).dump();
  f.generation_config_json = json({{"do_sample", true}}).dump();
  f.tokenizer_config_json = json({{"eos_token", nullptr}}).dump();
  EXPECT_EQ(ids(stop_tokens(f, &plain)), std::vector<int32_t>{});
  EXPECT_EQ(stop_tokens(f, &plain)->summary(), "none");
  // No tokenizer at all (a checkpoint without tokenizer files): the configs'.
  EXPECT_EQ(ids(stop_tokens(published(), nullptr)), std::vector<int32_t>{kEndOfMsg});
}

TEST(StopTokens, EosTokenResolvedFromTheConfigWhenTheTokenizerHasNone) {
  // A tokenizer.json checkpoint: the tokenizer does not read
  // tokenizer_config.json, whose eos_token (string or added-token object)
  // is looked up among its tokens here.
  const Tokenizer tok = make_tokenizer(std::nullopt);
  StopTokenFiles f;
  f.tokenizer_config_json = json({{"eos_token", "[EOS]"}}).dump();
  EXPECT_EQ(ids(stop_tokens(f, &tok)), (std::vector<int32_t>{kEos, kEndOfMsg}));
  f.tokenizer_config_json =
      json({{"eos_token", {{"content", "<|open|>"}, {"special", true}}}}).dump();
  EXPECT_EQ(ids(stop_tokens(f, &tok)), (std::vector<int32_t>{kEndOfMsg, kOpen}));
}

TEST(StopTokens, IdsOutsideTheVocabularyAreRefusedNamingFileAndKey) {
  const Tokenizer tok = make_tokenizer("[EOS]");
  StopTokenFiles f = published();
  f.config_json = json({{"eos_token_id", 300}, {"text_config", {{"vocab_size", 300}}}}).dump();
  EXPECT_EQ(error(stop_tokens(f, &tok)),
            "config.json: eos_token_id: 300 is outside the vocabulary [0, 300) (config.json's "
            "vocab_size)");
  f.config_json =
      json({{"text_config", {{"vocab_size", 300}, {"eos_token_id", {kEndOfMsg, 1000}}}}}).dump();
  EXPECT_EQ(error(stop_tokens(f, &tok)),
            "config.json: text_config.eos_token_id[1]: 1000 is outside the vocabulary [0, 300) "
            "(config.json's vocab_size)");
  f.config_json = json({{"vocab_size", 300}}).dump();
  f.generation_config_json = json({{"eos_token_id", {-1}}}).dump();
  EXPECT_EQ(error(stop_tokens(f, &tok)),
            "generation_config.json: eos_token_id[0]: -1 is outside the vocabulary [0, 300) "
            "(config.json's vocab_size)");
  // Beyond int64 too.
  f.generation_config_json = R"({"eos_token_id": 18446744073709551615})";
  EXPECT_NE(error(stop_tokens(f, &tok)).find("18446744073709551615 is outside"), std::string::npos);
  // Without config.json, the tokenizer's vocabulary bounds them.
  f.config_json.reset();
  f.generation_config_json = json({{"eos_token_id", 300}}).dump();
  EXPECT_EQ(error(stop_tokens(f, &tok)),
            "generation_config.json: eos_token_id: 300 is outside the vocabulary [0, 300) of the "
            "tokenizer");
  // The tokenizer's own ids against a smaller model vocabulary.
  f = published();
  f.config_json = json({{"text_config", {{"vocab_size", kEndOfMsg}}}}).dump();
  EXPECT_EQ(error(stop_tokens(f, &tok)),
            "<|end_of_msg|> is token 258, outside the vocabulary [0, 258) (config.json's "
            "vocab_size)");
  f.config_json = json({{"text_config", {{"vocab_size", kEos}}}}).dump();
  EXPECT_EQ(error(stop_tokens(f, &tok)),
            "tokenizer_config.json: eos_token '[EOS]' is token 257, outside the vocabulary [0, "
            "257) (config.json's vocab_size)");
}

TEST(StopTokens, MalformedValuesAreRefusedNamingFileAndKey) {
  const Tokenizer tok = make_tokenizer("[EOS]");
  auto with_config = [&](const std::string& config) {
    StopTokenFiles f;
    f.config_json = config;
    return stop_tokens(f, &tok);
  };
  EXPECT_EQ(error(with_config(R"({"eos_token_id": "[EOS]"})")),
            "config.json: eos_token_id must be a token id or a list of token ids");
  EXPECT_EQ(error(with_config(R"({"text_config": {"eos_token_id": [1, true]}})")),
            "config.json: text_config.eos_token_id[1] must be a token id (an integer), not true");
  EXPECT_EQ(error(with_config(R"({"eos_token_id": 2.5})")),
            "config.json: eos_token_id must be a token id or a list of token ids");
  EXPECT_EQ(error(with_config(R"({"text_config": 3})")),
            "config.json: text_config is not an object");
  EXPECT_EQ(error(with_config(R"({"vocab_size": "big"})")),
            "config.json: vocab_size must be a positive token count");
  EXPECT_NE(error(with_config("{")).find("config.json: not valid JSON"), std::string::npos);
  EXPECT_EQ(error(with_config("[1]")), "config.json: not a JSON object");

  StopTokenFiles f;
  f.generation_config_json = R"({"eos_token_id": {"id": 1}})";
  EXPECT_EQ(error(stop_tokens(f, &tok)),
            "generation_config.json: eos_token_id must be a token id or a list of token ids");
  f = {};
  f.tokenizer_config_json = R"({"eos_token": 257})";
  EXPECT_EQ(error(stop_tokens(f, &tok)),
            "tokenizer_config.json: eos_token must be a string or an object with a string "
            "'content'");
  // An eos_token that is no token: the stop would never happen.
  const Tokenizer no_eos = make_tokenizer(std::nullopt);
  f.tokenizer_config_json = R"({"eos_token": "</s>"})";
  EXPECT_EQ(error(stop_tokens(f, &no_eos)),
            "tokenizer_config.json: eos_token '</s>' is not a token of the vocabulary");
}

TEST(StopTokens, LoadedFromAModelDirectoryNamingThePaths) {
  testing::TempDir dir;
  const Tokenizer tok = make_tokenizer("[EOS]");
  const StopTokenFiles p = published();
  testing::write_file(dir.file("config.json"), *p.config_json);
  testing::write_file(dir.file("tokenizer_config.json"), *p.tokenizer_config_json);
  EXPECT_EQ(ids(load_stop_tokens(dir.path(), &tok)), (std::vector<int32_t>{kEos, kEndOfMsg}));
  testing::write_file(dir.file("generation_config.json"), R"({"eos_token_id": [1, 999]})");
  EXPECT_EQ(error(load_stop_tokens(dir.path(), &tok)),
            cat(dir.path(),
                "/generation_config.json: eos_token_id[1]: 999 is outside the "
                "vocabulary [0, 300) (",
                dir.path(), "/config.json's vocab_size)"));
}

// k3ctl mkmodel writes eos as published: <|end_of_msg|> alone in config.json
// and generation_config.json, [EOS] as the tokenizer's eos_token; the rule
// adds [EOS].
TEST(StopTokens, MkmodelCheckpointStopsOnEosByTheRule) {
  const std::string dir = testing::tiny_model_dir();
  auto tok = Tokenizer::load(dir);
  ASSERT_TRUE(tok.ok()) << tok.status();
  const TokenId eos = *tok->special_id("[EOS]");
  const TokenId end = *tok->special_id("<|end_of_msg|>");
  const json config = json::parse(testing::read_file(dir + "/config.json"));
  EXPECT_EQ(config["text_config"]["eos_token_id"], end);
  EXPECT_EQ(json::parse(testing::read_file(dir + "/tokenizer_config.json"))["eos_token"], "[EOS]");
  EXPECT_EQ(ids(load_stop_tokens(dir, &*tok)), (std::vector<int32_t>{eos, end}));
}

}  // namespace
}  // namespace k3::checkpoint
