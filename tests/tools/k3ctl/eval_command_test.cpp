// k3ctl eval as a real process: its perplexity agrees with engined score's
// logits computed here, identical settings give KL 0 and full agreement, and
// bad settings are refused naming the side.
#include <gtest/gtest.h>

#include <cmath>
#include <nlohmann/json.hpp>

#include "shared/checkpoint/model_config.h"
#include "shared/tokenizer/tokenizer.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

using json = nlohmann::json;
using testing::TempDir;

const char* kText =
    "The quick brown fox jumps over the lazy dog. Der schnelle braune Fuchs springt. "
    "Le renard brun saute par-dessus le chien paresseux. 1234567 + 89 = 1234656.\n";

std::string k3ctl() {
  return testing::bin_dir() + "/k3ctl";
}

TEST(Eval, PerplexityKlAndAgreementAreThoseOfTheLogits) {
  TempDir tmp;
  const std::string model = testing::tiny_model_dir();
  testing::write_file(tmp.file("t.txt"), kText);
  auto r = testing::run_command({k3ctl(), "eval", "--model", model, "--text", tmp.file("t.txt"),
                                 "--config-a", "--dense-bits 32", "--config-b",
                                 "--dense-bits 4 --mla-bits 4 --head-bits 4"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json out = json::parse(r.out);

  // The same perplexity from engined score's logits, computed here.
  auto tok = tokenizer::Tokenizer::load(model);
  auto ids = tok->encode(kText);
  std::string list;
  for (auto id : *ids) list += (list.empty() ? "" : ",") + std::to_string(id);
  ASSERT_EQ(testing::run_command({testing::bin_dir() + "/engined", "score", "--model", model,
                                  "--ids", list, "--out", tmp.file("a.f32"), "--dense-bits", "32"})
                .exit_code,
            0);
  const std::string bytes = testing::read_file(tmp.file("a.f32"));
  const int64_t V = checkpoint::load_model_config(model)->vocab_size,
                T = static_cast<int64_t>(ids->size());
  ASSERT_EQ(bytes.size(), static_cast<size_t>(T * V * 4));
  const float* x = reinterpret_cast<const float*>(bytes.data());
  double nll = 0;
  for (int64_t t = 0; t + 1 < T; ++t) {
    double m = -INFINITY, s = 0;
    for (int64_t i = 0; i < V; ++i) m = std::max(m, double(x[t * V + i]));
    for (int64_t i = 0; i < V; ++i) s += std::exp(double(x[t * V + i]) - m);
    nll -= double(x[t * V + (*ids)[static_cast<size_t>(t + 1)]]) - m - std::log(s);
  }
  EXPECT_EQ(out["tokens"], T);
  EXPECT_NEAR(out["a"]["perplexity"].get<double>(), std::exp(nll / double(T - 1)),
              1e-9 * std::exp(nll / double(T - 1)));
  EXPECT_GT(out["mean_kl_a_b"].get<double>(), 0.0);
  EXPECT_LT(out["argmax_agreement"].get<double>(), 1.0 + 1e-12);
  EXPECT_NE(out["a"]["perplexity"], out["b"]["perplexity"]);
  EXPECT_GT(out["a"]["expert_bytes_used_per_token"].get<double>(), 0.0);
  EXPECT_GT(out["a"]["expert_bytes_read_per_token"].get<double>(), 0.0);

  // Identical settings: nothing differs.
  r = testing::run_command({k3ctl(), "eval", "--model", model, "--text", tmp.file("t.txt"),
                            "--config-a", "", "--config-b", "", "--max-tokens", "16"});
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const json same = json::parse(r.out);
  EXPECT_EQ(same["tokens"], 16);
  EXPECT_EQ(same["mean_kl_a_b"].get<double>(), 0.0);
  EXPECT_EQ(same["argmax_agreement"].get<double>(), 1.0);
  EXPECT_EQ(same["a"]["perplexity"], same["b"]["perplexity"]);
}

TEST(Eval, BadSettingsAreRefusedNamingTheSide) {
  TempDir tmp;
  testing::write_file(tmp.file("t.txt"), kText);
  auto r =
      testing::run_command({k3ctl(), "eval", "--model", testing::tiny_model_dir(), "--text",
                            tmp.file("t.txt"), "--config-a", "", "--config-b", "--dense-bits 5"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--config-b \"--dense-bits 5\": engined score exited"), std::string::npos)
      << r.err;
  r = testing::run_command({k3ctl(), "eval", "--model", testing::tiny_model_dir(), "--text",
                            tmp.file("t.txt"), "--config-a", "--ids 1,2", "--config-b", ""});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("--config-a: --ids is set by k3ctl eval itself"), std::string::npos)
      << r.err;
  testing::write_file(tmp.file("one.txt"), "a");
  r = testing::run_command({k3ctl(), "eval", "--model", testing::tiny_model_dir(), "--text",
                            tmp.file("one.txt"), "--config-a", "", "--config-b", ""});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("eval needs at least 2 to predict one"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace k3
