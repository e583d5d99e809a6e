// OpenAI's n on the real daemons (engined reading the tiny model's experts
// in-process, the gateway): n choices come from one prefill, choice i is the
// lone request with seed + i, streams interleave the choices by index, usage
// counts the prompt once, the limits are refused naming 'n', and the gRPC API
// carries the same choices.
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

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

json chat_request(uint64_t seed) {
  return {{"messages", {{{"role", "user"}, {"content", "Tell me about the sea."}}}},
          {"max_tokens", 10},
          {"temperature", 1.0},
          {"seed", seed},
          {"logprobs", true},
          {"top_logprobs", 2}};
}

TEST(ApiChoices, EachChoiceIsTheLoneRequestWithSeedPlusIFromOnePrefill) {
  Stack s(in_process(3));
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  const uint64_t seed = 900;
  // First, on a fresh engine (nothing to continue or restore): one prefill.
  const uint64_t prefilled_before = s.engine_stats().prefill_tokens();
  json req = chat_request(seed);
  req["n"] = 3;
  const json three = ok_post(s, "/v1/chat/completions", req);
  ASSERT_EQ(three["choices"].size(), 3u) << three.dump();
  const int64_t prompt_tokens = three["usage"]["prompt_tokens"];
  EXPECT_EQ(s.engine_stats().prefill_tokens() - prefilled_before,
            static_cast<uint64_t>(prompt_tokens));
  EXPECT_EQ(three["usage"]["prompt_tokens_details"]["cached_tokens"], 0);

  int64_t completion = 0;
  std::vector<json> alone;
  for (int i = 0; i < 3; ++i) {
    const json one = ok_post(s, "/v1/chat/completions", chat_request(seed + i));
    ASSERT_EQ(one["choices"].size(), 1u);
    const json& a = one["choices"][0];
    const json& c = three["choices"][static_cast<size_t>(i)];
    EXPECT_EQ(c["index"], i);
    EXPECT_EQ(c["message"], a["message"]) << "choice " << i;
    EXPECT_EQ(c["finish_reason"], a["finish_reason"]) << "choice " << i;
    // Bit-identical log-probabilities (the JSON numbers round-trip floats).
    EXPECT_EQ(c["logprobs"], a["logprobs"]) << "choice " << i;
    EXPECT_EQ(one["usage"]["prompt_tokens"], prompt_tokens);
    completion += one["usage"]["completion_tokens"].get<int64_t>();
    alone.push_back(a);
  }
  EXPECT_EQ(three["usage"]["completion_tokens"], completion);
  EXPECT_EQ(three["usage"]["total_tokens"], prompt_tokens + completion);
  EXPECT_NE(alone[0]["message"], alone[2]["message"]) << "the seeds do not change the choices";

  // Completions too.
  json creq = {{"prompt", "The sea is"}, {"max_tokens", 8}, {"temperature", 1.0}, {"seed", 5}};
  json cn = creq;
  cn["n"] = 2;
  const json two = ok_post(s, "/v1/completions", cn);
  ASSERT_EQ(two["choices"].size(), 2u) << two.dump();
  for (int i = 0; i < 2; ++i) {
    json ci = creq;
    ci["seed"] = 5 + i;
    const json one = ok_post(s, "/v1/completions", ci);
    EXPECT_EQ(two["choices"][static_cast<size_t>(i)]["index"], i);
    EXPECT_EQ(two["choices"][static_cast<size_t>(i)]["text"], one["choices"][0]["text"]);
  }
}

TEST(ApiChoices, StreamsInterleaveTheChoicesByIndexAndCountUsageOnce) {
  Stack s(in_process(3));
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  json req = chat_request(77);
  req["n"] = 3;
  req["max_tokens"] = 12;
  const json whole = ok_post(s, "/v1/chat/completions", req);
  ASSERT_EQ(whole["choices"].size(), 3u);
  req["stream"] = true;
  req["stream_options"] = {{"include_usage", true}};
  auto r = s.post("/v1/chat/completions", req);
  ASSERT_TRUE(r);
  ASSERT_EQ(r->status, 200) << r->body;
  const std::vector<json> chunks = sse_chunks(r->body);
  ASSERT_FALSE(chunks.empty());
  std::map<int, std::string> content, reasoning;
  std::map<int, json> finish;
  std::map<int, int> chunks_of;
  std::vector<int> order;
  json usage;
  for (const json& c : chunks) {
    if (c.contains("usage") && !c["usage"].is_null()) usage = c["usage"];
    if (c["choices"].empty()) continue;
    ASSERT_EQ(c["choices"].size(), 1u);
    const json& ch = c["choices"][0];
    const int i = ch["index"];
    ASSERT_TRUE(i >= 0 && i < 3) << c.dump();
    EXPECT_FALSE(finish.count(i)) << "choice " << i << " has a chunk after its finish_reason";
    if (chunks_of[i]++ == 0) {
      EXPECT_EQ(ch["delta"].value("role", ""), "assistant") << c.dump();
    }
    content[i] += ch["delta"].value("content", "");
    reasoning[i] += ch["delta"].value("reasoning_content", "");
    if (!ch["finish_reason"].is_null()) finish[i] = ch["finish_reason"];
    order.push_back(i);
  }
  for (int i = 0; i < 3; ++i) {
    const json& m = whole["choices"][static_cast<size_t>(i)]["message"];
    ASSERT_TRUE(finish.count(i)) << "choice " << i << " never finished";
    EXPECT_EQ(finish[i], whole["choices"][static_cast<size_t>(i)]["finish_reason"]);
    EXPECT_EQ(content[i], m["content"].is_null() ? "" : m["content"].get<std::string>());
    EXPECT_EQ(reasoning[i], m.value("reasoning_content", ""));
  }
  // Interleaved: some chunk of a later choice comes before the last chunk of
  // an earlier one (not three streams one after another).
  bool interleaved = false;
  for (size_t a = 0; a < order.size(); ++a)
    for (size_t b = a + 1; b < order.size(); ++b) interleaved |= order[a] > order[b];
  EXPECT_TRUE(interleaved);
  // The usage chunk: prompt once, completion tokens over the choices.
  ASSERT_TRUE(usage.is_object()) << r->body;
  EXPECT_EQ(usage["prompt_tokens"], whole["usage"]["prompt_tokens"]);
  EXPECT_EQ(usage["completion_tokens"], whole["usage"]["completion_tokens"]);
  EXPECT_GT(usage["completion_tokens"].get<int>(), 12);  // more than one choice's worth
  EXPECT_NE(r->body.find("data: [DONE]"), std::string::npos);
}

void expect_refused_naming_n(const httplib::Result& r, const std::string& says) {
  ASSERT_TRUE(r);
  EXPECT_EQ(r->status, 400) << r->body;
  const json e = json::parse(r->body, nullptr, false).value("error", json::object());
  EXPECT_EQ(e.value("param", json()), "n") << r->body;
  EXPECT_EQ(e.value("type", ""), "invalid_request_error") << r->body;
  EXPECT_NE(e.value("message", "").find(says), std::string::npos) << r->body;
}

TEST(ApiChoices, RefusesMoreThanEightOrMoreThanTheFreeSessions) {
  Stack s(in_process(3));
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  json req = chat_request(1);
  req["n"] = 9;
  expect_refused_naming_n(s.post("/v1/chat/completions", req), "between 1 and 8");
  req["n"] = 0;
  expect_refused_naming_n(s.post("/v1/chat/completions", req), "between 1 and 8");
  req["n"] = 4;
  expect_refused_naming_n(s.post("/v1/chat/completions", req), "only 3 of the engine's 3 sessions");
  expect_refused_naming_n(s.post("/v1/completions", {{"prompt", "x"}, {"n", 9}, {"max_tokens", 2}}),
                          "'n'");

  // One session held by a long gRPC request: n = 3 is more than the free 2.
  auto stub = s.gateway_stub();
  grpc::ClientContext ctx;
  v1::CompleteRequest long_req;
  long_req.set_prompt("A long story:");
  // Its eos ids banned, so it runs until cancelled.
  for (int32_t id : s.engine_describe().eos_ids())
    (*long_req.mutable_sampling()->mutable_logit_bias())[id] = -100;
  auto reader = stub->Complete(&ctx, long_req);  // max_tokens 0: up to the context
  v1::CompleteEvent e;
  ASSERT_TRUE(reader->Read(&e));
  req["n"] = 3;
  expect_refused_naming_n(s.post("/v1/chat/completions", req), "only 2 of the engine's 3 sessions");
  // Two fit.
  req["n"] = 2;
  req["max_tokens"] = 3;
  EXPECT_EQ(ok_post(s, "/v1/chat/completions", req)["choices"].size(), 2u);
  ctx.TryCancel();
  while (reader->Read(&e)) {
  }
  reader->Finish();
  // A client that hangs up cancels every choice: all three sessions free.
  ASSERT_TRUE(
      s.wait_engine([](const v1::EngineStatsResponse& st) { return st.sessions_busy() == 0; }));
  req["n"] = 3;
  EXPECT_EQ(ok_post(s, "/v1/chat/completions", req)["choices"].size(), 3u);
}

TEST(ApiChoices, GrpcChatCarriesTheChoicesByIndex) {
  Stack s(in_process(2));
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  json req = chat_request(31);
  req.erase("logprobs");
  req.erase("top_logprobs");
  req["n"] = 2;
  const json whole = ok_post(s, "/v1/chat/completions", req);
  ASSERT_EQ(whole["choices"].size(), 2u);

  auto stub = s.gateway_stub();
  grpc::ClientContext ctx;
  v1::ChatRequest g;
  auto* m = g.add_messages();
  m->set_role("user");
  m->set_content("Tell me about the sea.");
  g.set_max_tokens(10);
  g.mutable_sampling()->set_temperature(1.0f);
  g.mutable_sampling()->set_seed(31);
  g.set_n(2);
  auto reader = stub->Chat(&ctx, g);
  std::map<uint32_t, std::string> content, reasoning;
  std::map<uint32_t, v1::ChatDone> done;
  v1::ChatEvent e;
  while (reader->Read(&e)) {
    ASSERT_LT(e.index(), 2u);
    if (e.has_delta()) {
      EXPECT_FALSE(done.count(e.index())) << "a delta after its choice's done";
      content[e.index()] += e.delta().content();
      reasoning[e.index()] += e.delta().reasoning_content();
    } else if (e.has_done()) {
      EXPECT_FALSE(done.count(e.index()));
      done[e.index()] = e.done();
    }
  }
  ASSERT_TRUE(reader->Finish().ok());
  ASSERT_EQ(done.size(), 2u);
  for (uint32_t i = 0; i < 2; ++i) {
    const json& c = whole["choices"][i];
    EXPECT_EQ(content[i],
              c["message"]["content"].is_null() ? "" : c["message"]["content"].get<std::string>());
    EXPECT_EQ(reasoning[i], c["message"].value("reasoning_content", ""));
    EXPECT_EQ(done[i].finish_reason(), c["finish_reason"]);
    EXPECT_EQ(done[i].usage().prompt_tokens(), whole["usage"]["prompt_tokens"]);
    EXPECT_EQ(done[i].usage().completion_tokens(), whole["usage"]["completion_tokens"]);
  }
  // n over the limit: INVALID_ARGUMENT naming it.
  grpc::ClientContext ctx9;
  g.set_n(9);
  auto bad = stub->Chat(&ctx9, g);
  while (bad->Read(&e)) {
  }
  const grpc::Status st = bad->Finish();
  EXPECT_EQ(st.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(st.error_message().find("'n'"), std::string::npos) << st.error_message();
}

}  // namespace
}  // namespace k3
