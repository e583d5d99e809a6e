// k3ctl chat's conversation: the requests it makes and its /save file.
#include "tools/k3ctl/conversation.h"

#include <sys/stat.h>

#include <gtest/gtest.h>

#include <filesystem>

#include "shared/base/scratch_dir.h"
#include "tests/test_util.h"

namespace k3::tools {
namespace {

namespace v1 = k3serve::v1;

ChatOptions options() {
  ChatOptions o;
  o.model = "k3";
  o.system = "be brief";
  o.effort = "high";
  o.max_tokens = 9;
  return o;
}

Conversation two_turns() {
  Conversation c(options());
  c.add(make_message("user", "hi\nthere"));
  v1::ChatMessage reply = make_message("assistant", "hello");
  reply.set_reasoning_content("thinking \"quoted\"");
  v1::ToolCall* call = reply.add_tool_calls();
  call->set_id("call-1");
  call->set_name("lookup");
  call->set_arguments(R"({"q": "x"})");
  c.add(reply);
  c.add(make_message("user", "ünïcödé"));
  return c;
}

TEST(Conversation, TheRequestCarriesTheFlagsAndTheCommandsSettings) {
  Conversation c = two_turns();
  v1::ChatRequest r = c.request(options());
  EXPECT_EQ(r.model(), "k3");
  EXPECT_EQ(r.max_tokens(), 9u);
  EXPECT_EQ(r.thinking_effort(), "high");
  ASSERT_EQ(r.messages_size(), 4);
  EXPECT_EQ(r.messages(0).role(), "system");
  EXPECT_EQ(r.messages(0).content(), "be brief");
  EXPECT_EQ(r.messages(2).tool_calls(0).name(), "lookup");

  c.set_system("");
  ASSERT_TRUE(c.set_think("off").ok());
  r = c.request(options());
  ASSERT_EQ(r.messages_size(), 3);  // no system message
  ASSERT_TRUE(r.has_enable_thinking());
  EXPECT_FALSE(r.enable_thinking());
  EXPECT_EQ(r.thinking_effort(), "");
  EXPECT_EQ(c.think_mode(), "off");

  ASSERT_TRUE(c.set_think("on").ok());
  r = c.request(options());
  EXPECT_FALSE(r.has_enable_thinking());
  EXPECT_EQ(r.thinking_effort(), "");  // the model's default, max
  EXPECT_TRUE(c.effort().empty());
  EXPECT_EQ(c.think_mode(), "max");
  EXPECT_FALSE(c.set_think("medium").ok());  // not one of the model's efforts
  EXPECT_EQ(c.think_mode(), "max");
}

TEST(Conversation, SaveThenLoadGivesTheSameConversation) {
  StatusOr<std::unique_ptr<base::ScratchDir>> dir = base::ScratchDir::create("conversation");
  ASSERT_TRUE(dir.ok()) << dir.status();
  const std::string path = (*dir)->file("chat.json");
  const Conversation saved = two_turns();
  ASSERT_TRUE(saved.save(path).ok());
  EXPECT_EQ(std::filesystem::status(path).permissions(), std::filesystem::perms(0600))
      << "only its user reads a saved conversation";
  ChatOptions other;
  Conversation loaded(other);
  ASSERT_TRUE(loaded.load(path).ok());
  EXPECT_EQ(loaded.to_json(), saved.to_json());
  EXPECT_EQ(loaded.system(), "be brief");
  EXPECT_EQ(loaded.think_mode(), "high");
  ASSERT_EQ(loaded.messages().size(), 3u);
  EXPECT_EQ(loaded.messages()[0].content(), "hi\nthere");
  EXPECT_EQ(loaded.messages()[1].reasoning_content(), "thinking \"quoted\"");
  EXPECT_EQ(loaded.messages()[1].tool_calls(0).arguments(), R"({"q": "x"})");
  EXPECT_EQ(loaded.messages()[2].content(), "ünïcödé");
}

TEST(Conversation, ABadFileIsRefusedByFieldAndChangesNothing) {
  Conversation c = two_turns();
  const std::string before = c.to_json();
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"not json", "not valid JSON"},
      {"[]", "JSON object"},
      {R"({"messages": []})", "'format' is missing"},
      {R"({"format": "other", "messages": []})", "'format' is 'other'"},
      {R"({"format": "k3serve-chat-1"})", "'messages' must be a list"},
      {R"({"format": "k3serve-chat-1", "messages": [1]})", "messages[0]: must be an object"},
      {R"({"format": "k3serve-chat-1", "messages": [{"role": "root", "content": ""}]})",
       "role must be user or assistant"},
      {R"({"format": "k3serve-chat-1", "messages": [{"role": "user", "content": 5}]})",
       "messages[0]: 'content' must be a string"},
      {R"({"format": "k3serve-chat-1", "thinking_effort": "medium", "messages": []})",
       "'thinking_effort' must be"},
      {R"({"format": "k3serve-chat-1", "thinking": "yes", "messages": []})",
       "'thinking' must be true or false"},
      {R"({"format": "k3serve-chat-1", "messages": [{"role": "user", "tool_calls": []}]})",
       "only assistant messages carry tool_calls"},
      {"{\"format\": \"k3serve-chat-1\", \"messages\": [{\"role\": \"user\", \"content\": "
       "\"\xff\"}]}",
       "not valid JSON"},
  };
  for (const auto& [text, expected] : cases) {
    const Status s = c.load_json(text);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_NE(msg(s).find(expected), std::string::npos) << text << " -> " << msg(s);
    EXPECT_EQ(c.to_json(), before) << text;
  }
  EXPECT_FALSE(c.load("/nonexistent/chat.json").ok());
}

}  // namespace
}  // namespace k3::tools
