// engined's score and generate jobs: their --ids parsing, and the engined
// command line running them.
#include "engined/score_and_generate.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <nlohmann/json.hpp>

#include "shared/tokenizer/tokenizer.h"
#include "tests/test_util.h"

namespace k3::engined {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

TEST(Engine, ParseIds) {
  EXPECT_EQ(*parse_ids("1,2,3"), (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(*parse_ids("0"), std::vector<int32_t>{0});
  EXPECT_EQ(msg(parse_ids("").status()), "empty prompt: --ids has no token ids");
  EXPECT_FALSE(parse_ids("1,").ok());
  EXPECT_FALSE(parse_ids("1,,2").ok());
  EXPECT_FALSE(parse_ids("-1").ok());
  EXPECT_FALSE(parse_ids("1 2").ok());
  EXPECT_FALSE(parse_ids("99999999999").ok());
}

TEST(EnginedCli, ScoreWritesEveryPositionAndRefusesBadInput) {
  TempDir tmp;
  const std::string engined = testing::bin_dir() + "/engined";
  auto r = testing::run_command({engined, "score", "--model", testing::tiny_model_dir(), "--ids",
                                 "1,2,3", "--out", tmp.file("l.bin"), "--dense-bits", "32"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto c = checkpoint::load_model_config(testing::tiny_model_dir());
  EXPECT_EQ(fs::file_size(tmp.file("l.bin")), 3u * c->vocab_size * 4);

  r = testing::run_command({engined, "score", "--model", testing::tiny_model_dir(), "--ids",
                            "1,999999", "--out", tmp.file("x.bin")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("token id 999999 at position 1 is outside the vocabulary"),
            std::string::npos)
      << r.err;

  // A checkpoint missing a tensor, and one with a wrong shape.
  const std::string broken = tmp.file("broken");
  fs::copy(testing::tiny_model_dir(), broken, fs::copy_options::recursive);
  auto index = nlohmann::json::parse(testing::read_file(broken + "/model.safetensors.index.json"));
  index["weight_map"].erase("language_model.model.layers.2.self_attn.q_proj.weight");
  testing::write_file(broken + "/model.safetensors.index.json", index.dump());
  r = testing::run_command(
      {engined, "score", "--model", broken, "--ids", "1,2", "--out", tmp.file("y.bin")});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("checkpoint is missing tensor "
                       "'language_model.model.layers.2.self_attn.q_proj.weight'"),
            std::string::npos)
      << r.err;

  const std::string wide = tmp.file("wide");
  fs::copy(testing::tiny_model_dir(), wide, fs::copy_options::recursive);
  auto config = nlohmann::json::parse(testing::read_file(wide + "/config.json"));
  config["text_config"]["intermediate_size"] = 1056;
  testing::write_file(wide + "/config.json", config.dump());
  r = testing::run_command(
      {engined, "score", "--model", wide, "--ids", "1,2", "--out", tmp.file("z.bin")});
  EXPECT_EQ(r.exit_code, 1);
  // Refused where the tensor is bound: file, tensor, expected, found.
  EXPECT_NE(r.err.find("model.layers.0.mlp.gate_proj.weight': expected BF16, F16 or F32 [1056, "
                       "512] (or its .q8 / .q4 form), found BF16 [1024, 512]"),
            std::string::npos)
      << r.err;
}

TEST(EnginedCli, GeneratePrintsIdsAndTiming) {
  auto r = testing::run_command({testing::bin_dir() + "/engined", "generate", "--model",
                                 testing::tiny_model_dir(), "--ids", "5,6,7", "--max-tokens", "6",
                                 "--log-level", "warn"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out.rfind("ids: ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("timing: prefill "), std::string::npos);
  EXPECT_NE(r.out.find("s/token"), std::string::npos);
  EXPECT_NE(r.out.find("expert bytes read per token"), std::string::npos);
  // Greedy generation is deterministic.
  auto again = testing::run_command({testing::bin_dir() + "/engined", "generate", "--model",
                                     testing::tiny_model_dir(), "--ids", "5,6,7", "--max-tokens",
                                     "6", "--log-level", "warn"});
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), again.out.substr(0, again.out.find('\n')));
}

// The sampling flags take the API's ranges (the gateway's): a temperature
// the front door refuses is refused here too, naming the field, before the
// model loads.
TEST(EnginedCli, GenerateRefusesSamplingOutsideTheApisRanges) {
  auto r = testing::run_command({testing::bin_dir() + "/engined", "generate", "--model",
                                 testing::tiny_model_dir(), "--ids", "5,6,7", "--max-tokens", "2",
                                 "--temperature", "3", "--log-level", "warn"});
  EXPECT_EQ(r.exit_code, 1) << r.out;
  EXPECT_NE(r.err.find("'temperature' must be between 0 and 2"), std::string::npos) << r.err;
  EXPECT_TRUE(r.out.empty()) << r.out;
}

// `engined generate` stops at the model's stop tokens
// (shared/checkpoint/stop_tokens.h): the tiny model's config.json names only
// <|end_of_msg|>, and [EOS], the tokenizer's eos_token, stops by the rule.
// Forced with logit_bias, it is the one token generated, in every prompt
// form, and never shown as text.
TEST(EnginedGenerate, StopsAtTheTokenizersEos) {
  auto tok = tokenizer::Tokenizer::load(testing::tiny_model_dir());
  ASSERT_TRUE(tok.ok()) << tok.status();
  const int32_t eos = *tok->special_id("[EOS]");
  const int32_t bos = *tok->special_id("[BOS]");
  auto generate = [&](GenerateJob job, int32_t forced) {
    job.model_dir = testing::tiny_model_dir();
    job.max_tokens = 6;
    job.sampling.logit_bias[forced] = 100.0f;
    ::testing::internal::CaptureStdout();
    const Status st = run_generate(job);
    std::string out = ::testing::internal::GetCapturedStdout();
    EXPECT_TRUE(st.ok()) << st;
    return out;
  };
  GenerateJob ids;
  ids.ids = "5,6,7";
  EXPECT_EQ(generate(ids, eos).rfind(cat("ids: ", eos, "\n"), 0), 0u);
  GenerateJob prompt;
  prompt.prompt = "Hello";
  std::string out = generate(prompt, eos);
  EXPECT_EQ(out.rfind(cat("ids: ", eos, "\ntext: \"\"\n"), 0), 0u) << out;
  GenerateJob chat;
  chat.chat = "Hello";
  out = generate(chat, eos);
  EXPECT_EQ(out.rfind(cat("ids: ", eos, "\nreasoning: \"\"\ncontent: \"\"\n"), 0), 0u) << out;
  // A special token that is no stop, forced the same way, runs to
  // --max-tokens: the stop is the rule's, not logit_bias's.
  const std::string b = cat(" ", bos);
  EXPECT_EQ(generate(ids, bos).rfind(cat("ids:", b, b, b, b, b, b, "\n"), 0), 0u);
}

}  // namespace
}  // namespace k3::engined
