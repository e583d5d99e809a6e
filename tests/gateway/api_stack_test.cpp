// The OpenAI and gRPC API surface on the real daemons (engined reading the
// tiny model's experts in-process, the gateway): every sampling field reaches
// engined and does what it says, by exact properties of the output.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "shared/tokenizer/tokenizer.h"
#include "tests/gateway/stack_fixture.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

using json = nlohmann::json;
using testing::in_process;
using testing::ok_post;
using testing::sse_chunks;
using testing::Stack;
using testing::StackOptions;
namespace v1 = k3serve::v1;

std::vector<int> prompt_ids() {
  std::vector<int> v;
  for (int i = 0; i < 24; ++i) v.push_back(7 + (i * 53) % 2000);
  return v;
}

std::string complete(const Stack& s, json body) {
  body["prompt"] = prompt_ids();
  if (!body.contains("max_tokens")) body["max_tokens"] = 12;
  return ok_post(s, "/v1/completions", body)["choices"][0]["text"].get<std::string>();
}

// A single-token text's id.
int token_of(const Stack& s, const std::string& text) {
  const json t = ok_post(s, "/tokenize", {{"content", text}});
  EXPECT_EQ(t["tokens"].size(), 1u) << text;
  return t["tokens"][0].get<int>();
}

std::string repeat(const std::string& piece, int n) {
  std::string out;
  for (int i = 0; i < n; ++i) out += piece;
  return out;
}

std::string grpc_complete(const Stack& s, const v1::Sampling& sampling) {
  auto stub = s.gateway_stub();
  grpc::ClientContext ctx;
  v1::CompleteRequest req;
  for (int id : prompt_ids()) req.add_prompt_ids(id);
  req.set_max_tokens(12);
  *req.mutable_sampling() = sampling;
  auto reader = stub->Complete(&ctx, req);
  std::string text;
  v1::CompleteEvent e;
  while (reader->Read(&e))
    if (e.has_text()) text += e.text();
  EXPECT_TRUE(reader->Finish().ok());
  return text;
}

TEST(ApiSampling, TopKOneIsGreedyAtAnyTemperature) {
  Stack s(in_process());
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  const std::string greedy = complete(s, {{"temperature", 0}});
  ASSERT_FALSE(greedy.empty());
  for (double t : {0.7, 2.0})
    for (int seed : {1, 2}) {
      EXPECT_EQ(complete(s, {{"temperature", t}, {"top_k", 1}, {"seed", seed}}), greedy)
          << "temperature " << t << " seed " << seed;
    }
  // Sampling at temperature 2 without top_k does leave the greedy path.
  std::set<std::string> sampled;
  for (int seed = 1; seed <= 4; ++seed)
    sampled.insert(complete(s, {{"temperature", 2}, {"seed", seed}}));
  EXPECT_TRUE(sampled.size() > 1 || *sampled.begin() != greedy);

  // Chat: the whole message is the greedy one.
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Say something."}}}},
                     {"max_tokens", 10}};
  json g = chat;
  g["temperature"] = 0;
  json k1 = chat;
  k1["temperature"] = 1.9;
  k1["top_k"] = 1;
  k1["seed"] = 11;
  EXPECT_EQ(ok_post(s, "/v1/chat/completions", k1)["choices"][0]["message"],
            ok_post(s, "/v1/chat/completions", g)["choices"][0]["message"]);

  // gRPC carries top_k too.
  v1::Sampling sp;
  sp.set_temperature(2.0f);
  sp.set_top_k(1);
  sp.set_seed(5);
  EXPECT_EQ(grpc_complete(s, sp), greedy);
}

TEST(ApiSampling, LogitBiasForcesAndBansTokens) {
  Stack s(in_process());
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  const int a = token_of(s, "a"), b = token_of(s, "b");
  // +100 on one token: greedy emits only it.
  EXPECT_EQ(complete(s, {{"temperature", 0}, {"logit_bias", {{std::to_string(a), 100}}}}),
            repeat("a", 12));
  // +100 on both: greedy picks between them by the model's logits...
  const json both = {{std::to_string(a), 100}, {std::to_string(b), 100}};
  const std::string mixed = complete(s, {{"temperature", 0}, {"logit_bias", both}});
  ASSERT_EQ(mixed.size(), 12u);
  ASSERT_EQ(mixed.find_first_not_of("ab"), std::string::npos) << mixed;
  // ...and -100 bans the one it picked first: only the other is left.
  const bool first_a = mixed[0] == 'a';
  const int banned = first_a ? a : b;
  const int kept = first_a ? b : a;
  const json ban = {{std::to_string(banned), -100}, {std::to_string(kept), 100}};
  EXPECT_EQ(complete(s, {{"temperature", 0}, {"logit_bias", ban}}),
            repeat(first_a ? "b" : "a", 12));
  // The same over gRPC.
  v1::Sampling sp;
  sp.set_temperature(0.0f);
  (*sp.mutable_logit_bias())[banned] = -100.0f;
  (*sp.mutable_logit_bias())[kept] = 100.0f;
  EXPECT_EQ(grpc_complete(s, sp), repeat(first_a ? "b" : "a", 12));
  // An id outside the vocabulary is refused, naming the field.
  auto r = s.post("/v1/completions",
                  {{"prompt", "x"}, {"logit_bias", {{"99999999", 5}}}, {"max_tokens", 2}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("'logit_bias' names token 99999999"), std::string::npos) << r->body;
  // -100 on every id leaves nothing to sample: refused, not token 0 forever.
  const size_t at = r->body.find("[0, ");
  ASSERT_NE(at, std::string::npos) << r->body;
  const int vocab = std::stoi(r->body.substr(at + 4));
  ASSERT_GT(vocab, 256);
  json all = json::object();
  for (int id = 0; id < vocab; ++id) all[std::to_string(id)] = -100;
  r = s.post("/v1/completions", {{"prompt", "x"}, {"logit_bias", all}, {"max_tokens", 2}});
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400);
  EXPECT_NE(r->body.find("'logit_bias' bans every token"), std::string::npos) << r->body;
  // All but one: that one is the reply.
  all.erase(std::to_string(a));
  EXPECT_EQ(complete(s, {{"temperature", 0}, {"logit_bias", all}}), repeat("a", 12));
}

// The model's stop tokens (shared/checkpoint/stop_tokens.h). The tiny
// model's eos is written as the published snapshot's: <|end_of_msg|> alone in
// config.json, [EOS] the tokenizer's eos_token; [EOS] stops by the rule.
// Forced with logit_bias, it ends the reply at once: one token, finish_reason
// stop, no [EOS] in the text; over HTTP and gRPC, chat and completions.
TEST(ApiStops, ForcedEosEndsTheReplyAtOnce) {
  Stack s(in_process());
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  auto tok = tokenizer::Tokenizer::load(testing::tiny_model_dir());
  ASSERT_TRUE(tok.ok()) << tok.status();
  const int eos = *tok->special_id("[EOS]");
  const int end_of_msg = *tok->special_id("<|end_of_msg|>");
  const int bos = *tok->special_id("[BOS]");
  // engined's Describe names the whole set.
  const auto described = s.engine_describe().eos_ids();
  EXPECT_EQ(std::set<int>(described.begin(), described.end()), (std::set<int>{eos, end_of_msg}));

  const json force = {{std::to_string(eos), 100}};
  const json completion = {{"prompt", prompt_ids()},
                           {"max_tokens", 8},
                           {"temperature", 0},
                           {"logprobs", 0},
                           {"return_tokens_as_token_ids", true},
                           {"logit_bias", force}};
  json j = ok_post(s, "/v1/completions", completion);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop") << j.dump();
  EXPECT_EQ(j["choices"][0]["text"], "");
  EXPECT_EQ(j["usage"]["completion_tokens"], 1);
  EXPECT_EQ(j["choices"][0]["logprobs"]["tokens"], json({"token_id:" + std::to_string(eos)}));

  const json chat = {{"messages", {{{"role", "user"}, {"content", "Say something."}}}},
                     {"max_tokens", 8},
                     {"temperature", 0},
                     {"logit_bias", force}};
  j = ok_post(s, "/v1/chat/completions", chat);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "stop") << j.dump();
  EXPECT_EQ(j["usage"]["completion_tokens"], 1);
  const json& m = j["choices"][0]["message"];
  EXPECT_TRUE(m["content"].is_null() || m["content"] == "") << m.dump();
  EXPECT_EQ(m.dump().find("[EOS]"), std::string::npos) << m.dump();
  // Streamed: the same end, no [EOS] in any chunk.
  json streamed = chat;
  streamed["stream"] = true;
  auto r = s.post("/v1/chat/completions", streamed);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  EXPECT_EQ(r->body.find("[EOS]"), std::string::npos) << r->body;
  std::string finish;
  for (const json& c : testing::sse_chunks(r->body))
    if (!c["choices"].empty() && c["choices"][0]["finish_reason"].is_string())
      finish = c["choices"][0]["finish_reason"];
  EXPECT_EQ(finish, "stop");

  // gRPC: Complete and Chat.
  v1::Sampling sp;
  sp.set_temperature(0.0f);
  (*sp.mutable_logit_bias())[eos] = 100.0f;
  {
    auto stub = s.gateway_stub();
    grpc::ClientContext ctx;
    v1::CompleteRequest req;
    for (int id : prompt_ids()) req.add_prompt_ids(id);
    req.set_max_tokens(8);
    *req.mutable_sampling() = sp;
    auto reader = stub->Complete(&ctx, req);
    std::string text, reason;
    v1::CompleteEvent e;
    uint32_t generated = 0;
    while (reader->Read(&e)) {
      text += e.text();
      if (e.has_done()) {
        reason = e.done().finish_reason();
        generated = e.done().usage().completion_tokens();
      }
    }
    EXPECT_TRUE(reader->Finish().ok());
    EXPECT_EQ(text, "");
    EXPECT_EQ(reason, "stop");
    EXPECT_EQ(generated, 1u);
  }
  {
    auto stub = s.gateway_stub();
    grpc::ClientContext ctx;
    v1::ChatRequest req;
    auto* msg = req.add_messages();
    msg->set_role("user");
    msg->set_content("Say something.");
    req.set_max_tokens(8);
    *req.mutable_sampling() = sp;
    auto reader = stub->Chat(&ctx, req);
    std::string text, reason;
    v1::ChatEvent e;
    uint32_t generated = 0;
    while (reader->Read(&e)) {
      text += e.delta().reasoning_content() + e.delta().content();
      if (e.has_done()) {
        reason = e.done().finish_reason();
        generated = e.done().usage().completion_tokens();
      }
    }
    EXPECT_TRUE(reader->Finish().ok());
    EXPECT_EQ(text, "");
    EXPECT_EQ(reason, "stop");
    EXPECT_EQ(generated, 1u);
  }

  // A special token that is not a stop, forced the same way, runs to
  // max_tokens: the stop above is the stop set's, not logit_bias's.
  json other = completion;
  other["logit_bias"] = {{std::to_string(bos), 100}};
  j = ok_post(s, "/v1/completions", other);
  EXPECT_EQ(j["choices"][0]["finish_reason"], "length") << j.dump();
  EXPECT_EQ(j["usage"]["completion_tokens"], 8);
  EXPECT_EQ(j["choices"][0]["text"], "");
}

TEST(ApiSampling, SeedReproducesTheSameTokens) {
  Stack s(in_process());
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  const json body = {{"temperature", 1.5}, {"seed", 1234}, {"top_p", 0.99}, {"min_p", 0.001}};
  const std::string first = complete(s, body);
  EXPECT_EQ(complete(s, body), first);
  // gRPC with the same fields: the same tokens.
  v1::Sampling sp;
  sp.set_temperature(1.5f);
  sp.set_seed(1234);
  sp.set_top_p(0.99f);
  sp.set_min_p(0.001f);
  EXPECT_EQ(grpc_complete(s, sp), first);
  // Other seeds sample other tokens.
  std::set<std::string> seen = {first};
  for (int seed = 1; seed <= 4; ++seed)
    seen.insert(complete(s, {{"temperature", 1.5}, {"seed", seed}}));
  EXPECT_GE(seen.size(), 3u);
}

// A copy of the tiny model (links) with its own generation_config.json.
std::string model_with_generation_config(const testing::TempDir& dir, const json& config) {
  namespace fs = std::filesystem;
  for (const auto& e : fs::directory_iterator(testing::tiny_model_dir()))
    if (e.path().filename() != "generation_config.json")
      fs::create_symlink(e.path(), dir.file(e.path().filename().string()));
  testing::write_file(dir.file("generation_config.json"), config.dump());
  return dir.path();
}

TEST(ApiSampling, UnsetFieldsTakeGenerationConfigDefaults) {
  testing::TempDir model;
  StackOptions o = in_process();
  o.model_dir = model_with_generation_config(model, {{"temperature", 1.8}, {"top_k", 1}});
  Stack s(o);
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  const std::string greedy = complete(s, {{"temperature", 0}});
  // The model's top_k 1: greedy whatever the seed.
  for (int seed : {1, 2, 3}) EXPECT_EQ(complete(s, {{"seed", seed}}), greedy) << seed;
  // The client's top_k wins (0: no limit), at the model's temperature 1.8.
  std::set<std::string> seen;
  for (int seed : {1, 2, 3, 4}) seen.insert(complete(s, {{"seed", seed}, {"top_k", 0}}));
  EXPECT_TRUE(seen.size() > 1 || *seen.begin() != greedy);
}

// engined score's teacher-forced logits of `ids`, as log-softmax rows: row i
// predicts ids[i + 1].
std::vector<std::vector<double>> score_logprobs(const std::vector<int>& ids) {
  testing::TempDir tmp;
  std::string csv;
  for (int id : ids) csv += (csv.empty() ? "" : ",") + std::to_string(id);
  const auto r = testing::run_command({testing::bin_dir() + "/engined", "score", "--model",
                                       testing::tiny_model_dir(), "--ids", csv, "--out",
                                       tmp.file("logits.f32"), "--threads", "2"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  const std::string raw = testing::read_file(tmp.file("logits.f32"));
  const size_t vocab = raw.size() / sizeof(float) / ids.size();
  std::vector<std::vector<double>> rows(ids.size(), std::vector<double>(vocab));
  for (size_t t = 0; t < ids.size(); ++t) {
    const float* x = reinterpret_cast<const float*>(raw.data()) + t * vocab;
    double m = -1e300, sum = 0;
    for (size_t v = 0; v < vocab; ++v) m = std::max(m, static_cast<double>(x[v]));
    for (size_t v = 0; v < vocab; ++v) sum += std::exp(x[v] - m);
    for (size_t v = 0; v < vocab; ++v) rows[t][v] = x[v] - m - std::log(sum);
  }
  return rows;
}

int id_of(const json& token) {  // "token_id:N" (return_tokens_as_token_ids)
  const std::string t = token.get<std::string>();
  EXPECT_EQ(t.rfind("token_id:", 0), 0u) << t;
  return std::stoi(t.substr(9));
}

// Each generated token's logprob and its top list against engined score's
// rows over prompt + generated.
void expect_matches_score(const std::vector<int>& prompt, const std::vector<int>& generated,
                          const std::vector<double>& logprob,
                          const std::vector<std::vector<std::pair<int, double>>>& top) {
  std::vector<int> all = prompt;
  all.insert(all.end(), generated.begin(), generated.end());
  const auto rows = score_logprobs(all);
  ASSERT_EQ(rows.size(), all.size());
  for (size_t j = 0; j < generated.size(); ++j) {
    const auto& row = rows[prompt.size() - 1 + j];
    EXPECT_NEAR(logprob[j], row[static_cast<size_t>(generated[j])], 2e-3) << "token " << j;
    double prev = 1;
    for (const auto& [id, lp] : top[j]) {
      EXPECT_NEAR(lp, row[static_cast<size_t>(id)], 2e-3) << "token " << j << " top " << id;
      EXPECT_LE(lp, prev + 1e-6);  // best first
      prev = lp;
    }
    // Nothing outside the list is more likely than its last entry.
    if (!top[j].empty()) {
      std::vector<double> sorted = row;
      std::sort(sorted.rbegin(), sorted.rend());
      EXPECT_NEAR(top[j].back().second, sorted[top[j].size() - 1], 2e-3);
    }
  }
}

TEST(ApiLogprobs, CompletionsMatchEnginedScoreBeforeProcessors) {
  Stack s(in_process());
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  const int a = token_of(s, "a");
  // Sampled (seeded), with a logit_bias: the logprobs stay the model's own.
  const json j = ok_post(s, "/v1/completions",
                         {{"prompt", prompt_ids()},
                          {"max_tokens", 6},
                          {"temperature", 1.0},
                          {"seed", 3},
                          {"logprobs", 4},
                          {"return_tokens_as_token_ids", true},
                          {"logit_bias", {{std::to_string(a), 100}}}});
  const json& lp = j["choices"][0]["logprobs"];
  ASSERT_EQ(lp["tokens"].size(), 6u) << j.dump();
  std::vector<int> gen;
  std::vector<double> values;
  std::vector<std::vector<std::pair<int, double>>> top;
  for (size_t i = 0; i < 6; ++i) {
    gen.push_back(id_of(lp["tokens"][i]));
    EXPECT_EQ(gen.back(), a);  // the bias decided the token...
    values.push_back(lp["token_logprobs"][i].get<double>());
    EXPECT_LT(values.back(), -0.01);  // ...not the reported probability
    std::vector<std::pair<int, double>> t;
    for (const auto& [k, v] : lp["top_logprobs"][i].items()) t.emplace_back(id_of(json(k)), v);
    std::sort(t.begin(), t.end(), [](auto& x, auto& y) { return x.second > y.second; });
    EXPECT_EQ(t.size(), 4u);
    top.push_back(t);
    EXPECT_EQ(lp["text_offset"][i], i);  // one byte per "a"
  }
  expect_matches_score(prompt_ids(), gen, values, top);
}

TEST(ApiLogprobs, StreamedChatMatchesEnginedScore) {
  Stack s(in_process());
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  const json chat = {{"messages", {{{"role", "user"}, {"content", "Hello there"}}}},
                     {"max_tokens", 8},
                     {"temperature", 0.8},
                     {"seed", 5}};
  json req = chat;
  req["stream"] = true;
  req["logprobs"] = true;
  req["top_logprobs"] = 3;
  req["return_tokens_as_token_ids"] = true;
  auto r = s.post("/v1/chat/completions", req);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  std::vector<int> gen;
  std::vector<double> values;
  std::vector<std::vector<std::pair<int, double>>> top;
  for (const json& chunk : sse_chunks(r->body)) {
    if (chunk["choices"].empty()) continue;
    const json& lp = chunk["choices"][0]["logprobs"];
    if (lp.is_null()) continue;
    for (const json& e : lp["content"]) {
      gen.push_back(id_of(e["token"]));
      values.push_back(e["logprob"]);
      std::vector<std::pair<int, double>> t;
      for (const json& x : e["top_logprobs"]) t.emplace_back(id_of(x["token"]), x["logprob"]);
      EXPECT_EQ(t.size(), 3u);
      top.push_back(t);
    }
  }
  ASSERT_FALSE(gen.empty()) << r->body;
  EXPECT_LE(gen.size(), 8u);
  const json tmpl = ok_post(s, "/apply-template", chat);
  expect_matches_score(tmpl["tokens"].get<std::vector<int>>(), gen, values, top);
  // Without streaming: the same tokens and values in the message's choice.
  req["stream"] = false;
  const json whole = ok_post(s, "/v1/chat/completions", req);
  const json& content = whole["choices"][0]["logprobs"]["content"];
  ASSERT_EQ(content.size(), gen.size());
  for (size_t i = 0; i < gen.size(); ++i) {
    EXPECT_EQ(id_of(content[i]["token"]), gen[i]);
    EXPECT_EQ(content[i]["logprob"].get<double>(), values[i]);
  }
  // Not asked for: null.
  EXPECT_TRUE(ok_post(s, "/v1/chat/completions", chat)["choices"][0]["logprobs"].is_null());
}

}  // namespace
}  // namespace k3
