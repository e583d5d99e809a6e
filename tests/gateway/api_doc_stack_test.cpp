// docs/openai-api.md against the server (the real daemons: engined reading
// the tiny model's experts in-process, the gateway): every request field the
// doc lists is served or refused by name, a field it does not list is
// ignored and named (refused under --strict-fields), and /v1/models lists the
// served names with engined's context.
#include <gtest/gtest.h>

#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "tests/gateway/stack_fixture.h"
#include "tests/test_util.h"

namespace k3 {
namespace {

using json = nlohmann::json;
using testing::in_process;
using testing::ok_post;
using testing::Stack;
using testing::StackOptions;

struct DocRow {
  std::string path, field, status;
  json adds;
  int line = 0;
};

// The rows of the doc's two tables.
std::vector<DocRow> doc_rows() {
  std::vector<DocRow> rows;
  std::istringstream in(testing::read_file(testing::source_dir() + "/docs/openai-api.md"));
  std::string line, path;
  int n = 0;
  while (std::getline(in, line)) {
    ++n;
    // Each endpoint's table; other sections ("Objects inside requests") are
    // request_fields_test.cpp's.
    if (line.rfind("## ", 0) == 0) path = line.rfind("## POST ", 0) == 0 ? line.substr(8) : "";
    if (line.rfind("| `", 0) != 0 || path.empty()) continue;
    std::vector<std::string> cells;
    size_t at = 1;
    for (int i = 0; i < 4; ++i) {
      const size_t bar = line.find('|', at);
      if (bar == std::string::npos) break;
      std::string c = line.substr(at, bar - at);
      c.erase(0, c.find_first_not_of(" `"));
      c.erase(c.find_last_not_of(" `") + 1);
      cells.push_back(c);
      at = bar + 1;
    }
    EXPECT_EQ(cells.size(), 4u) << "line " << n;
    if (cells.size() != 4) continue;
    DocRow r{path, cells[0], cells[1], json::parse(cells[2], nullptr, false), n};
    EXPECT_TRUE(r.adds.is_object()) << "line " << n << ": " << cells[2];
    rows.push_back(std::move(r));
  }
  return rows;
}

TEST(ApiDoc, ListsEveryOpenAiRequestField) {
  std::map<std::string, std::set<std::string>> listed;
  for (const DocRow& r : doc_rows()) {
    listed[r.path].insert(r.field);
    EXPECT_TRUE(r.status == "supported" || r.status == "refused" || r.status == "constraint")
        << "line " << r.line << ": " << r.status;
  }
  // OpenAI's request fields (API reference, chat.completions.create and
  // completions.create).
  for (const char* f : {"messages",
                        "model",
                        "audio",
                        "frequency_penalty",
                        "function_call",
                        "functions",
                        "logit_bias",
                        "logprobs",
                        "max_completion_tokens",
                        "max_tokens",
                        "metadata",
                        "modalities",
                        "n",
                        "parallel_tool_calls",
                        "prediction",
                        "presence_penalty",
                        "prompt_cache_key",
                        "reasoning_effort",
                        "response_format",
                        "safety_identifier",
                        "seed",
                        "service_tier",
                        "stop",
                        "store",
                        "stream",
                        "stream_options",
                        "temperature",
                        "tool_choice",
                        "tools",
                        "top_logprobs",
                        "top_p",
                        "user",
                        "verbosity",
                        "web_search_options"})
    EXPECT_TRUE(listed["/v1/chat/completions"].count(f)) << "chat: " << f;
  for (const char* f : {"model", "prompt", "best_of", "echo", "frequency_penalty", "logit_bias",
                        "logprobs", "max_tokens", "n", "presence_penalty", "seed", "stop", "stream",
                        "stream_options", "suffix", "temperature", "top_p", "user"})
    EXPECT_TRUE(listed["/v1/completions"].count(f)) << "completions: " << f;
}

// The smallest valid request of each endpoint of docs/openai-api.md.
json minimal_body(const std::string& path) {
  if (path == "/v1/chat/completions")
    return {{"messages", {{{"role", "user"}, {"content", "Hi"}}}},
            {"max_tokens", 3},
            {"temperature", 0}};
  if (path == "/tokenize") return {{"content", "Hello"}};
  if (path == "/detokenize") return {{"tokens", {9, 10}}};
  return {{"prompt", "Hello"}, {"max_tokens", 3}, {"temperature", 0}};
}

// Under --strict-fields a field the doc does not list is refused by every
// endpoint, and inside a nested object, with the field's path in `param`.
TEST(ApiDoc, StrictFieldsRefuseAFieldNotListedByName) {
  StackOptions o = in_process();
  o.gateway_flags = {"--strict-fields"};
  Stack s(o);
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  std::set<std::string> paths;
  for (const DocRow& row : doc_rows()) paths.insert(row.path);
  EXPECT_EQ(paths.size(), 4u);
  std::vector<std::tuple<std::string, json, std::string>> cases;
  for (const std::string& p : paths) {
    json body = minimal_body(p);
    body["k3_not_a_field"] = 1;
    cases.emplace_back(p, body, "k3_not_a_field");
  }
  json chat = minimal_body("/v1/chat/completions");
  chat["messages"][0]["audio"] = {{"id", "a1"}};
  cases.emplace_back("/v1/chat/completions", chat, "messages[0].audio");
  cases.emplace_back("/apply-template", chat, "messages[0].audio");
  // The cases, each on its own: echoed or not, strict refuses them.
  json history = minimal_body("/v1/chat/completions");
  history["messages"] = {{{"role", "user"}, {"content", "Weather?"}},
                         {{"role", "assistant"},
                          {"content", nullptr},
                          {"tool_calls",
                           {{{"index", 0},
                             {"id", "c1"},
                             {"type", "function"},
                             {"function", {{"name", "weather"}, {"arguments", "{}"}}}}}}},
                         {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "sunny"}}};
  cases.emplace_back("/v1/chat/completions", history, "messages[1].tool_calls[0].index");
  json annotated = minimal_body("/v1/chat/completions");
  annotated["messages"] = {
      {{"role", "user"}, {"content", "Hi"}},
      {{"role", "assistant"}, {"content", "Hello"}, {"annotations", json::array({1})}},
      {{"role", "user"}, {"content", "Bye"}}};
  cases.emplace_back("/v1/chat/completions", annotated, "messages[1].annotations");
  json cached = minimal_body("/v1/chat/completions");
  cached["messages"][0]["content"] = {
      {{"type", "text"}, {"text", "Hi"}, {"cache_control", {{"type", "ephemeral"}}}}};
  cases.emplace_back("/v1/chat/completions", cached, "messages[0].content[0].cache_control");
  json ollama = minimal_body("/v1/chat/completions");
  ollama["options"] = {{"num_ctx", 4096}};
  cases.emplace_back("/v1/chat/completions", ollama, "options");
  for (const auto& [path, body, param] : cases) {
    auto r = s.post(path, body);
    ASSERT_TRUE(r) << path;
    const std::string where = path + " " + body.dump() + " -> " + r->body;
    EXPECT_EQ(r->status, 400) << where;
    EXPECT_FALSE(r->has_header("x-k3-ignored-fields")) << where;
    const json err = json::parse(r->body, nullptr, false);
    const json e = err.is_object() ? err.value("error", json::object()) : json::object();
    EXPECT_EQ(e.value("type", ""), "invalid_request_error") << where;
    EXPECT_EQ(e.value("param", ""), param) << where;
    EXPECT_NE(e.value("message", "").find("'" + param + "'"), std::string::npos) << where;
  }
}

// By default a field the doc does not list is accepted and ignored: the
// reply names it in x-k3-ignored-fields (plain and streamed), the log in a
// warning; what clients echo back is accepted silently. Through a real HTTP
// client on the daemons.
TEST(ApiDoc, AFieldNotListedIsIgnoredAndNamed) {
  Stack s(in_process());
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  json chat = minimal_body("/v1/chat/completions");
  chat["messages"] = {
      {{"role", "system"},
       {"content",
        {{{"type", "text"}, {"text", "Be brief."}, {"cache_control", {{"type", "ephemeral"}}}}}}},
      {{"role", "user"}, {"content", "Weather?"}},
      {{"role", "assistant"},
       {"content", nullptr},
       {"refusal", nullptr},
       {"annotations", json::array()},
       {"tool_calls",
        {{{"index", 0},
          {"id", "c1"},
          {"type", "function"},
          {"function", {{"name", "weather"}, {"arguments", "{}"}}}}}}},
      {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "sunny"}},
      {{"role", "user"}, {"content", "Thanks"}, {"x_client_tag", 7}}};
  chat["options"] = {{"num_ctx", 4096}};
  const std::string named = "options,messages[4].x_client_tag";

  auto plain = s.post("/v1/chat/completions", chat);
  ASSERT_TRUE(plain);
  EXPECT_EQ(plain->status, 200) << plain->body;
  EXPECT_EQ(plain->get_header_value("x-k3-ignored-fields"), named);

  json streamed = chat;
  streamed["stream"] = true;
  auto sse = s.post("/v1/chat/completions", streamed);
  ASSERT_TRUE(sse);
  EXPECT_EQ(sse->status, 200) << sse->body;
  EXPECT_EQ(sse->get_header_value("x-k3-ignored-fields"), named);
  EXPECT_NE(sse->body.find("data: [DONE]"), std::string::npos) << sse->body;

  // Only echoed fields: nothing to name, no header.
  json echoed = chat;
  echoed.erase("options");
  echoed["messages"][4].erase("x_client_tag");
  auto quiet = s.post("/v1/chat/completions", echoed);
  ASSERT_TRUE(quiet);
  EXPECT_EQ(quiet->status, 200) << quiet->body;
  EXPECT_FALSE(quiet->has_header("x-k3-ignored-fields"));
  // The echoed fields reach no prompt: the same as a history without them.
  json clean = echoed;
  clean["messages"][0]["content"][0].erase("cache_control");
  clean["messages"][2].erase("annotations");
  clean["messages"][2]["tool_calls"][0].erase("index");
  EXPECT_EQ(ok_post(s, "/apply-template", echoed)["tokens"],
            ok_post(s, "/apply-template", clean)["tokens"]);

  json completion = minimal_body("/v1/completions");
  completion["keep_alive"] = "5m";
  completion["stream_options"] = {{"include_usage", true}, {"continuous_usage_stats", true}};
  completion["stream"] = true;
  auto done = s.post("/v1/completions", completion);
  ASSERT_TRUE(done);
  EXPECT_EQ(done->status, 200) << done->body;
  EXPECT_EQ(done->get_header_value("x-k3-ignored-fields"),
            "keep_alive,stream_options.continuous_usage_stats");
  auto tok = s.post("/tokenize", {{"content", "Hi"}, {"add_special_tokens", true}});
  ASSERT_TRUE(tok);
  EXPECT_EQ(tok->status, 200) << tok->body;
  EXPECT_EQ(tok->get_header_value("x-k3-ignored-fields"), "add_special_tokens");
  // Known fields still do what they say, or are refused by name.
  json refused = minimal_body("/v1/chat/completions");
  refused["functions"] = json::array();
  refused["options"] = json::object();
  auto no = s.post("/v1/chat/completions", refused);
  ASSERT_TRUE(no);
  EXPECT_EQ(no->status, 400) << no->body;
  EXPECT_NE(no->body.find("'functions'"), std::string::npos) << no->body;
  EXPECT_NE(s.logs().find("ignored fields: options,messages[4].x_client_tag"), std::string::npos);
}

TEST(ApiDoc, EveryListedFieldIsServedOrRefusedByName) {
  Stack s(in_process());
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  int checked = 0;
  for (const DocRow& row : doc_rows()) {
    if (row.status == "constraint") continue;  // the constrained-decoding work's rows
    json body = minimal_body(row.path);
    body.update(row.adds);
    auto r = s.post(row.path, body);
    ASSERT_TRUE(r) << row.path << " " << body.dump();
    const std::string where = "docs/openai-api.md:" + std::to_string(row.line) + " " + row.path +
                              " " + body.dump() + " -> " + r->body;
    if (row.status == "supported") {
      EXPECT_EQ(r->status, 200) << where;
    } else {
      EXPECT_EQ(r->status, 400) << where;
      const json err = json::parse(r->body, nullptr, false);
      const json e = err.is_object() ? err.value("error", json::object()) : json::object();
      EXPECT_EQ(e.value("type", ""), "invalid_request_error") << where;
      EXPECT_NE(e.value("message", "").find("'" + row.field + "'"), std::string::npos) << where;
    }
    ++checked;
  }
  EXPECT_GE(checked, 60);
}

// The tiny model is laid out as a K3 checkpoint: served as kimi-k3 by
// default; --served-model-name adds aliases (--model-name is its old name),
// and /v1/models lists each with max_model_len, engined's --max-context.
TEST(ApiModels, ServedModelNamesAndMaxModelLen) {
  StackOptions o = in_process();
  o.engined_flags = {"--max-context", "1024"};
  o.gateway_flags = {"--served-model-name", "kimi-k3", "--model-name", "k3-alias"};
  Stack s(o);
  ASSERT_TRUE(s.wait_ready()) << s.logs();
  auto c = s.client();
  auto list = c.Get("/v1/models");
  ASSERT_TRUE(list);
  ASSERT_EQ(list->status, 200) << list->body;
  const json data = json::parse(list->body)["data"];
  ASSERT_EQ(data.size(), 2u) << list->body;
  EXPECT_EQ(data[0]["id"], "kimi-k3");
  EXPECT_EQ(data[1]["id"], "k3-alias");
  for (const json& m : data) {
    ASSERT_TRUE(m["max_model_len"].is_number_integer()) << m.dump();
    EXPECT_EQ(m["max_model_len"].get<int64_t>(), 1024);
  }
  auto one = c.Get("/v1/models/k3-alias");
  ASSERT_TRUE(one);
  EXPECT_EQ(one->status, 200) << one->body;
  EXPECT_EQ(json::parse(one->body)["id"], "k3-alias");
  EXPECT_EQ(json::parse(one->body)["max_model_len"], 1024);
  auto none = c.Get("/v1/models/other");
  ASSERT_TRUE(none);
  EXPECT_EQ(none->status, 404);

  json chat = minimal_body("/v1/chat/completions");
  for (const char* name : {"kimi-k3", "k3-alias"}) {
    chat["model"] = name;
    auto r = s.post("/v1/chat/completions", chat);
    ASSERT_TRUE(r);
    EXPECT_EQ(r->status, 200) << name << " " << r->body;
    // Replies name the model by its first name.
    EXPECT_EQ(json::parse(r->body)["model"], "kimi-k3") << r->body;
  }
  chat["model"] = "gpt-4o";
  auto refused = s.post("/v1/chat/completions", chat);
  ASSERT_TRUE(refused);
  EXPECT_EQ(refused->status, 404) << refused->body;
  EXPECT_NE(refused->body.find("'kimi-k3', 'k3-alias'"), std::string::npos) << refused->body;
}

}  // namespace
}  // namespace k3
