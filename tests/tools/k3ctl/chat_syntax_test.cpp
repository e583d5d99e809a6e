// What k3ctl chat makes of what the user types: /commands, "//" escapes and
// `"""` blocks.
#include "tools/k3ctl/chat_syntax.h"

#include <gtest/gtest.h>

namespace k3::tools {
namespace {

using K = ChatCommand::Kind;

TEST(ChatSyntax, TextIsAMessageKeptAsTyped) {
  const ChatCommand c = parse_chat_command("  hello /not a command ");
  EXPECT_EQ(c.kind, K::kMessage);
  EXPECT_EQ(c.text, "  hello /not a command ");
  EXPECT_EQ(parse_chat_command(" \t ").kind, K::kEmpty);
}

TEST(ChatSyntax, CommandsAndTheirArguments) {
  EXPECT_EQ(parse_chat_command("/help").kind, K::kHelp);
  EXPECT_EQ(parse_chat_command(" /reset ").kind, K::kReset);
  EXPECT_EQ(parse_chat_command("/stats").kind, K::kStats);
  EXPECT_EQ(parse_chat_command("/quit").kind, K::kQuit);
  const ChatCommand sys = parse_chat_command("/system  be  brief ");
  EXPECT_EQ(sys.kind, K::kSystem);
  EXPECT_EQ(sys.text, "be  brief");
  EXPECT_EQ(parse_chat_command("/system").text, "");
  for (const char* mode : {"off", "on", "low", "high", "max"}) {
    const ChatCommand t = parse_chat_command(std::string("/think ") + mode);
    EXPECT_EQ(t.kind, K::kThink) << mode;
    EXPECT_EQ(t.text, mode);
  }
  const ChatCommand save = parse_chat_command("/save my chat.json");
  EXPECT_EQ(save.kind, K::kSave);
  EXPECT_EQ(save.text, "my chat.json");
  EXPECT_EQ(parse_chat_command("/load x.json").kind, K::kLoad);
}

TEST(ChatSyntax, WrongCommandsAreRefusedWithTheReason) {
  const ChatCommand unknown = parse_chat_command("/frobnicate now");
  EXPECT_EQ(unknown.kind, K::kError);
  EXPECT_NE(unknown.text.find("unknown command /frobnicate"), std::string::npos);
  EXPECT_NE(unknown.text.find("not sent to the model"), std::string::npos);
  EXPECT_EQ(parse_chat_command("/think").kind, K::kError);
  EXPECT_NE(parse_chat_command("/think hard").text.find("'hard'"), std::string::npos);
  // The model's efforts only: medium is not one.
  EXPECT_EQ(parse_chat_command("/think medium").kind, K::kError);
  EXPECT_NE(parse_chat_command("/think medium").text.find("off, on, low, high or max"),
            std::string::npos);
  EXPECT_NE(parse_chat_command("/save").text.find("needs a FILE"), std::string::npos);
  EXPECT_NE(parse_chat_command("/reset all").text.find("takes no argument"), std::string::npos);
}

TEST(ChatSyntax, DoubleSlashSendsTheTextWithOneSlash) {
  const ChatCommand c = parse_chat_command("//etc/passwd is a path");
  EXPECT_EQ(c.kind, K::kMessage);
  EXPECT_EQ(c.text, "/etc/passwd is a path");
}

TEST(MultilineAssembler, PlainLinesAreWholeEntries) {
  MultilineAssembler a;
  std::string e;
  ASSERT_TRUE(a.add_line("one line", &e));
  EXPECT_EQ(e, "one line");
  ASSERT_TRUE(a.add_line(R"("""inline""")", &e));
  EXPECT_EQ(e, "inline");
}

TEST(MultilineAssembler, ABlockRunsToTheClosingQuotes) {
  MultilineAssembler a;
  std::string e = "untouched";
  EXPECT_FALSE(a.add_line(R"(""")", &e));
  EXPECT_TRUE(a.in_block());
  EXPECT_FALSE(a.add_line("first", &e));
  EXPECT_FALSE(a.add_line("", &e));
  EXPECT_FALSE(a.add_line("  indented", &e));
  EXPECT_EQ(e, "untouched");
  ASSERT_TRUE(a.add_line(R"(last""")", &e));
  EXPECT_EQ(e, "first\n\n  indented\nlast");
  EXPECT_FALSE(a.in_block());

  EXPECT_FALSE(a.add_line(R"("""starts here)", &e));
  ASSERT_TRUE(a.add_line(R"(""")", &e));
  EXPECT_EQ(e, "starts here");
}

TEST(MultilineAssembler, DiscardDropsAnOpenBlock) {
  MultilineAssembler a;
  std::string e;
  EXPECT_FALSE(a.add_line(R"(""")", &e));
  EXPECT_FALSE(a.add_line("dropped", &e));
  a.discard();
  ASSERT_TRUE(a.add_line("fresh", &e));
  EXPECT_EQ(e, "fresh");
}

}  // namespace
}  // namespace k3::tools
