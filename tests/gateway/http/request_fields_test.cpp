// The field lists of gateway/http/request_fields.h: they are docs/openai-api.md's
// (both ways); for each kind of object a field it does not list is refused
// under --strict-fields (the parsers' one-argument form) with 400
// invalid_request_error naming its path, the path in `param`, the same body
// without it accepted; and by default it is ignored: erased before the
// renderer sees it, named by its path unless clients echo it back.
#include "gateway/http/request_fields.h"

#include <map>
#include <set>
#include <sstream>
#include <string>

#include "gateway/core/status_codes.h"
#include "gateway/http/api_errors.h"
#include "gateway/http/chat_protocol.h"
#include "gateway/http/completion_protocol.h"
#include "gtest/gtest.h"
#include "tests/test_util.h"

namespace k3::gateway {
namespace {

using nlohmann::json;
using nlohmann::ordered_json;

// The cells of a table row "| a | b | ... |", trimmed of spaces and backticks.
std::vector<std::string> cells_of(const std::string& line) {
  std::vector<std::string> cells;
  size_t at = 1;
  for (size_t bar; (bar = line.find('|', at)) != std::string::npos; at = bar + 1) {
    std::string c = line.substr(at, bar - at);
    c.erase(0, c.find_first_not_of(" `"));
    c.erase(c.find_last_not_of(" `") + 1);
    cells.push_back(c);
  }
  return cells;
}

// Object -> fields, as docs/openai-api.md lists them: the first column of
// each "## POST PATH" table, and the object and field columns of "## Objects
// inside requests".
std::map<std::string, std::set<std::string>> doc_lists() {
  std::map<std::string, std::set<std::string>> out;
  std::istringstream in(testing::read_file(testing::source_dir() + "/docs/openai-api.md"));
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.rfind("## ", 0) == 0) section = line.substr(3);
    if (line.rfind("| `", 0) != 0) continue;
    const std::vector<std::string> c = cells_of(line);
    if (section.rfind("POST ", 0) == 0 && !c.empty()) {
      out[section.substr(5)].insert(c[0]);
    } else if (section == "Objects inside requests" && c.size() >= 2) {
      out[c[0]].insert(c[1]);
    }
  }
  return out;
}

TEST(RequestFields, ListsAreTheDocs) {
  std::map<std::string, std::set<std::string>> code;
  for (const RequestObject& o : request_objects()) {
    EXPECT_FALSE(code.count(std::string(o.name))) << "listed twice: " << o.name;
    for (std::string_view f : o.fields) code[std::string(o.name)].insert(std::string(f));
  }
  const auto doc = doc_lists();
  EXPECT_GE(doc.size(), 20u);
  for (const auto& [object, fields] : doc) {
    ASSERT_TRUE(code.count(object))
        << "docs/openai-api.md lists " << object << ", gateway/http/request_fields.cpp does not";
    for (const std::string& f : fields)
      EXPECT_TRUE(code[object].count(f)) << object << ": '" << f << "' is documented, not accepted";
  }
  for (const auto& [object, fields] : code) {
    ASSERT_TRUE(doc.count(object)) << object << " is not in docs/openai-api.md";
    for (const std::string& f : fields)
      EXPECT_TRUE(doc.at(object).count(f))
          << object << ": '" << f << "' is accepted, not documented";
  }
}

// `body` (with `path` set to an unlisted field) must be refused naming the
// path, in param too; `fine` (the same body without it) accepted.
void expect_refused_by_name(bool chat, const ordered_json& fine, const std::string& pointer,
                            const std::string& path) {
  const std::string ok_text = fine.dump();
  if (chat) {
    auto r = parse_chat_request(ok_text);
    ASSERT_TRUE(r.ok()) << r.status() << " " << ok_text;
  } else {
    auto r = parse_completion_request(ok_text);
    ASSERT_TRUE(r.ok()) << r.status() << " " << ok_text;
  }
  ordered_json bad = fine;
  bad[ordered_json::json_pointer(pointer)] = "x";
  const std::string text = bad.dump();
  const Status s =
      chat ? parse_chat_request(text).status() : parse_completion_request(text).status();
  ASSERT_FALSE(s.ok()) << "accepted: " << text;
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(msg(s).find("'" + path + "'"), std::string::npos) << s;
  EXPECT_EQ(error_param(s), path) << s;
  const json e = error_json(s)["error"];
  EXPECT_EQ(e["type"], "invalid_request_error");
  EXPECT_EQ(e["param"], path);
  EXPECT_EQ(http_status(s), 400);
}

ordered_json chat_with(const ordered_json& extra) {
  ordered_json b = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  if (!extra.is_null()) b.update(extra);
  return b;
}

TEST(RequestFields, ChatAndCompletionBodies) {
  expect_refused_by_name(true, chat_with(ordered_json::object()), "/frobnicate", "frobnicate");
  expect_refused_by_name(false, {{"prompt", "hi"}}, "/messages", "messages");
  // A field of chat's list only: completions refuses it.
  expect_refused_by_name(false, {{"prompt", "hi"}}, "/tools", "tools");
}

TEST(RequestFields, StreamOptions) {
  const ordered_json so = {{"stream", true}, {"stream_options", {{"include_usage", true}}}};
  expect_refused_by_name(true, chat_with(so), "/stream_options/continuous_usage_stats",
                         "stream_options.continuous_usage_stats");
  ordered_json done = so;
  done["prompt"] = "hi";
  expect_refused_by_name(false, done, "/stream_options/x", "stream_options.x");
}

TEST(RequestFields, MessagesByRole) {
  ordered_json conv = {
      {"messages",
       {{{"role", "system"}, {"content", "Be brief."}, {"name", "rules"}},
        {{"role", "developer"}, {"content", "Terse."}},
        {{"role", "user"}, {"content", "Weather?"}, {"name", "ann"}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"reasoning_content", "look it up"},
         {"tool_calls",
          {{{"id", "c1"},
            {"type", "function"},
            {"function", {{"name", "weather"}, {"arguments", "{\"city\":\"Oslo\"}"}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "sunny"}},
        {{"role", "user"}, {"content", {{{"type", "text"}, {"text", "Thanks"}}}}}}}};
  expect_refused_by_name(true, conv, "/messages/0/audio", "messages[0].audio");
  expect_refused_by_name(true, conv, "/messages/1/tool_calls", "messages[1].tool_calls");
  expect_refused_by_name(true, conv, "/messages/2/tool_call_id", "messages[2].tool_call_id");
  expect_refused_by_name(true, conv, "/messages/3/audio", "messages[3].audio");
  expect_refused_by_name(true, conv, "/messages/4/reasoning_content",
                         "messages[4].reasoning_content");
  // Content parts, tool calls and their functions.
  expect_refused_by_name(true, conv, "/messages/5/content/0/image_url",
                         "messages[5].content[0].image_url");
  expect_refused_by_name(true, conv, "/messages/3/tool_calls/0/index",
                         "messages[3].tool_calls[0].index");
  expect_refused_by_name(true, conv, "/messages/3/tool_calls/0/function/extra",
                         "messages[3].tool_calls[0].function.extra");
}

TEST(RequestFields, ToolsToolChoiceAndSystemTools) {
  const ordered_json tool = {
      {"type", "function"},
      {"function",
       {{"name", "weather"},
        {"description", "The weather"},
        {"strict", true},
        {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}};
  ordered_json b =
      chat_with({{"tools", {tool}},
                 {"tool_choice", {{"type", "function"}, {"function", {{"name", "weather"}}}}}});
  expect_refused_by_name(true, b, "/tools/0/cache_control", "tools[0].cache_control");
  expect_refused_by_name(true, b, "/tools/0/function/examples", "tools[0].function.examples");
  expect_refused_by_name(true, b, "/tool_choice/allowed_tools", "tool_choice.allowed_tools");
  expect_refused_by_name(true, b, "/tool_choice/function/arguments",
                         "tool_choice.function.arguments");
  ordered_json sys = {
      {"messages",
       {{{"role", "system"}, {"tools", {tool}}}, {{"role", "user"}, {"content", "hi"}}}}};
  expect_refused_by_name(true, sys, "/messages/0/tools/0/function/x",
                         "messages[0].tools[0].function.x");
}

TEST(RequestFields, ResponseFormat) {
  ordered_json b =
      chat_with({{"response_format",
                  {{"type", "json_schema"},
                   {"json_schema",
                    {{"name", "answer"}, {"strict", true}, {"schema", {{"type", "object"}}}}}}}});
  expect_refused_by_name(true, b, "/response_format/schema", "response_format.schema");
  expect_refused_by_name(true, b, "/response_format/json_schema/examples",
                         "response_format.json_schema.examples");
  // A json_schema object that is the schema itself: its keywords are the
  // schema compiler's (a keyword it does not know is refused there, later).
  auto bare = parse_chat_request(
      chat_with(
          {{"response_format", {{"type", "json_schema"}, {"json_schema", {{"type", "object"}}}}}})
          .dump());
  EXPECT_TRUE(bare.ok()) << bare.status();
}

TEST(RequestFields, ThinkingAndTemplateKwargs) {
  ordered_json b = chat_with(
      {{"thinking", {{"type", "enabled"}}}, {"chat_template_kwargs", {{"enable_thinking", true}}}});
  expect_refused_by_name(true, b, "/thinking/budget_tokens", "thinking.budget_tokens");
  expect_refused_by_name(true, b, "/chat_template_kwargs/add_generation_prompt",
                         "chat_template_kwargs.add_generation_prompt");
}

TEST(RequestFields, NullCountsAsAbsent) {
  ordered_json b = chat_with({{"frobnicate", nullptr}});
  b["messages"][0]["audio"] = nullptr;
  auto r = parse_chat_request(b.dump());
  EXPECT_TRUE(r.ok()) << r.status();
}

TEST(RequestFields, TokenizeAndDetokenize) {
  UnknownFields strict(UnknownFieldPolicy::kRefuse);
  ordered_json tok = {{"content", "hi"}};
  EXPECT_TRUE(check_request_fields("/tokenize", tok, strict).ok());
  ordered_json extra = {{"content", "hi"}, {"add_special_tokens", true}};
  Status s = check_request_fields("/tokenize", extra, strict);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(error_param(s), "add_special_tokens");
  ordered_json detok = {{"tokens", {1, 2}}};
  EXPECT_TRUE(check_request_fields("/detokenize", detok, strict).ok());
  ordered_json detok_extra = {{"tokens", {1}}, {"content", "x"}};
  s = check_request_fields("/detokenize", detok_extra, strict);
  EXPECT_EQ(error_param(s), "content") << s;

  UnknownFields lax(UnknownFieldPolicy::kIgnore);
  ASSERT_TRUE(check_request_fields("/tokenize", extra, lax).ok());
  EXPECT_EQ(extra, (ordered_json{{"content", "hi"}}));
  EXPECT_EQ(lax.ignored(), std::vector<std::string>{"add_special_tokens"});
}

// The issue's cases (agent loops, OpenAI history, LiteLLM, Ollama): what a
// client echoes back is accepted silently, the rest named; all erased.
ordered_json echoing_conversation() {
  return {
      {"messages",
       {{{"role", "system"},
         {"content",
          {{{"type", "text"}, {"text", "Be brief."}, {"cache_control", {{"type", "ephemeral"}}}}}}},
        {{"role", "user"}, {"content", "Weather?"}},
        {{"role", "assistant"},
         {"content", nullptr},
         {"refusal", nullptr},
         {"annotations", ordered_json::array()},
         {"tool_calls",
          {{{"index", 0},
            {"id", "c1"},
            {"type", "function"},
            {"function", {{"name", "weather"}, {"arguments", "{}"}}}}}}},
        {{"role", "tool"}, {"tool_call_id", "c1"}, {"content", "sunny"}},
        {{"role", "assistant"},
         {"content", "Sunny."},
         {"annotations", {{{"type", "url_citation"}}}},
         {"audio", {{"id", "a1"}}}},
        {{"role", "user"}, {"content", "Thanks"}, {"x_client_tag", 7}}}},
      {"options", {{"num_ctx", 4096}}},
      {"stream_options", {{"include_usage", true}, {"continuous_usage_stats", true}}},
      {"keep_alive", "5m"}};
}

TEST(RequestFields, UnknownFieldsAreIgnoredAndNamed) {
  ordered_json body = echoing_conversation();
  UnknownFields unknown(UnknownFieldPolicy::kIgnore);
  ASSERT_TRUE(check_request_fields("/v1/chat/completions", body, unknown).ok());
  EXPECT_EQ(unknown.ignored(), (std::vector<std::string>{"options", "keep_alive",
                                                         "stream_options.continuous_usage_stats",
                                                         "messages[5].x_client_tag"}));
  EXPECT_EQ(unknown.header_value(),
            "options,keep_alive,stream_options.continuous_usage_stats,messages[5].x_client_tag");
  // Erased, echoed or not: the renderer never sees them.
  EXPECT_FALSE(body.contains("options"));
  EXPECT_FALSE(body["messages"][0]["content"][0].contains("cache_control"));
  EXPECT_FALSE(body["messages"][2]["tool_calls"][0].contains("index"));
  EXPECT_FALSE(body["messages"][4].contains("annotations"));
  EXPECT_FALSE(body["messages"][4].contains("audio"));
  EXPECT_FALSE(body["stream_options"].contains("continuous_usage_stats"));
  EXPECT_TRUE(body["stream_options"]["include_usage"]);
  // Null stays null (counts as absent); refusal null was a listed-nowhere null.
  EXPECT_EQ(body["messages"][2]["tool_calls"][0]["id"], "c1");

  // The parser accepts the same body and records the same paths.
  UnknownFields again(UnknownFieldPolicy::kIgnore);
  auto call = parse_chat_request(echoing_conversation().dump(), again);
  ASSERT_TRUE(call.ok()) << call.status();
  EXPECT_EQ(again.ignored(), unknown.ignored());
  EXPECT_FALSE(call->render["messages"][2]["tool_calls"][0].contains("index"));
  EXPECT_TRUE(call->include_usage);
}

TEST(RequestFields, StrictFieldsRefuseEachByName) {
  const ordered_json fine = chat_with(ordered_json::object());
  for (const auto& [pointer, path] : std::vector<std::pair<std::string, std::string>>{
           {"/options", "options"},
           {"/messages/0/annotations", "messages[0].annotations"},
           {"/messages/0/cache_control", "messages[0].cache_control"}})
    expect_refused_by_name(true, fine, pointer, path);
  ordered_json parts = chat_with(ordered_json::object());
  parts["messages"][0]["content"] = {{{"type", "text"}, {"text", "hi"}}};
  expect_refused_by_name(true, parts, "/messages/0/content/0/cache_control",
                         "messages[0].content[0].cache_control");
  // The whole echoing conversation: its first unknown field, by name.
  auto r = parse_chat_request(echoing_conversation().dump());
  ASSERT_FALSE(r.ok());
  EXPECT_EQ(error_param(r.status()), "options") << r.status();
}

TEST(RequestFields, CompletionsIgnoreTopLevelAndStreamOptions) {
  UnknownFields unknown(UnknownFieldPolicy::kIgnore);
  auto call = parse_completion_request(
      R"({"prompt": "hi", "options": {"num_predict": 3}, "stream": true,
          "stream_options": {"include_usage": true, "x": 1}, "index": 0})",
      unknown);
  ASSERT_TRUE(call.ok()) << call.status();
  // Echoed names are silent only inside objects: at the top, `index` is named.
  EXPECT_EQ(unknown.ignored(), (std::vector<std::string>{"options", "index", "stream_options.x"}));
}

TEST(RequestFields, KnownFieldsStillWorkOrAreRefusedByName) {
  UnknownFields unknown(UnknownFieldPolicy::kIgnore);
  // A known field keeps its meaning and its checks under the lax policy.
  auto bad_type = parse_chat_request(R"({"messages": [{"role": "user", "content": "hi"}],
                                         "temperature": "hot", "options": {}})",
                                     unknown);
  ASSERT_FALSE(bad_type.ok());
  EXPECT_NE(msg(bad_type.status()).find("'temperature'"), std::string::npos);
  for (const char* refused : {R"("audio": {"voice": "alloy"})", R"("functions": [])",
                              R"("thinking": {"type": "enabled", "budget_tokens": 1024})"}) {
    UnknownFields u(UnknownFieldPolicy::kIgnore);
    auto r = parse_chat_request(
        cat(R"({"messages": [{"role": "user", "content": "hi"}], )", refused, "}"), u);
    ASSERT_FALSE(r.ok()) << refused;
    EXPECT_NE(msg(r.status()).find("not supported"), std::string::npos) << r.status();
  }
}

TEST(RequestFields, HeaderValueIsSafeAndBounded) {
  UnknownFields unknown(UnknownFieldPolicy::kIgnore);
  ordered_json body = {{"prompt", "hi"}, {"a,b\r\nX-Evil: 1%", 1}, {"caf\u00e9", 2}};
  ASSERT_TRUE(check_request_fields("/v1/completions", body, unknown).ok());
  EXPECT_EQ(unknown.header_value(), "a%2Cb%0D%0AX-Evil: 1%25,caf%C3%A9");
  ordered_json many = {{"prompt", "hi"}};
  for (int i = 0; i < 2000; ++i) many[cat("unknown_field_", i)] = i;
  UnknownFields lots(UnknownFieldPolicy::kIgnore);
  ASSERT_TRUE(check_request_fields("/v1/completions", many, lots).ok());
  EXPECT_EQ(lots.ignored().size(), 2000u);
  const std::string v = lots.header_value();
  EXPECT_LE(v.size(), UnknownFields::kMaxHeaderBytes + 4);
  EXPECT_EQ(v.substr(v.size() - 4), ",...");
  EXPECT_EQ(v.substr(0, 32), "unknown_field_0,unknown_field_1,");
}

// What every route does with a request's UnknownFields: the header when
// something was ignored, nothing otherwise.
TEST(RequestFields, NameIgnoredFieldsAddsTheHeaderOnlyWhenNeeded) {
  HttpRequest req;
  req.path = "/v1/chat/completions";
  req.request_id = "r1";
  UnknownFields quiet = unknown_fields_for(false);
  EXPECT_EQ(quiet.policy(), UnknownFieldPolicy::kIgnore);
  EXPECT_EQ(unknown_fields_for(true).policy(), UnknownFieldPolicy::kRefuse);
  HttpResponse none;
  name_ignored_fields(req, quiet, none);
  EXPECT_TRUE(none.headers.empty());
  ordered_json body = {{"prompt", "hi"}, {"options", ordered_json::object()}};
  ASSERT_TRUE(check_request_fields("/v1/completions", body, quiet).ok());
  HttpResponse named;
  name_ignored_fields(req, quiet, named);
  ASSERT_EQ(named.headers.size(), 1u);
  EXPECT_EQ(named.headers[0].first, "x-k3-ignored-fields");
  EXPECT_EQ(named.headers[0].second, "options");
}

}  // namespace
}  // namespace k3::gateway
