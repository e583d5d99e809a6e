// The OpenAI and gRPC API surface on the real daemons (engined reading the
// tiny model's experts in-process, the gateway): every sampling field reaches
// engined and does what it says, by exact properties of the output.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <filesystem>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "tests/gateway/stack_fixture.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

using json = nlohmann::json;
using testing::Stack;
using testing::StackOptions;
namespace v1 = k3serve::v1;

StackOptions in_process(int sessions = 2) {
  StackOptions o;
  o.expertd = 0;
  o.sessions = sessions;
  return o;
}

std::vector<int> prompt_ids() {
  std::vector<int> v;
  for (int i = 0; i < 24; ++i) v.push_back(7 + (i * 53) % 2000);
  return v;
}

// POST that must answer 200; the parsed body.
json ok_post(const Stack& s, const std::string& path, const json& body) {
  auto r = s.post(path, body);
  EXPECT_TRUE(r) << path;
  if (!r) return json();
  EXPECT_EQ(r->status, 200) << path << " " << body.dump() << " -> " << r->body;
  return json::parse(r->body);
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

}  // namespace
}  // namespace k3
