// shared/chat/xtml_render.cpp: the golden renderings
// (tests/data/chat/golden.json, whose expected segments the independent port
// tests/reference/xtml_ref.py wrote; reference_xtml_golden checks they still
// agree with it) and the refusals.
#include "shared/chat/xtml_render.h"

#include <nlohmann/json.hpp>

#include "gtest/gtest.h"
#include "tests/shared/chat/xtml_test_util.h"

namespace k3::chat {
namespace {

using nlohmann::ordered_json;
using testing::golden;
using testing::options_of;

// The golden notation: "@open" etc. are markup, everything else text.
Segments expected_segments(const ordered_json& list) {
  Segments out;
  for (const auto& item : list) {
    const std::string s = item;
    if (s == "@open") {
      out.push_back({"<|open|>", true});
    } else if (s == "@close") {
      out.push_back({"<|close|>", true});
    } else if (s == "@sep") {
      out.push_back({"<|sep|>", true});
    } else if (s == "@eom") {
      out.push_back({"<|end_of_msg|>", true});
    } else if (s == "@image") {
      out.push_back({std::string(kImagePlaceholder), true});
    } else {
      out.push_back({s, false});
    }
  }
  return out;
}

std::string show(const Segment& s) {
  return (s.markup ? "markup " : "text ") + ordered_json(s.text).dump();
}

TEST(XtmlGolden, AtLeastThirtyConversations) {
  EXPECT_GE(golden()["cases"].size(), 30u);
  EXPECT_GE(golden()["errors"].size(), 20u);
}

TEST(XtmlGolden, RendersEveryCaseExactly) {
  for (const auto& c : golden()["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    StatusOr<Segments> got = render_chat(c["request"], options_of(c));
    ASSERT_TRUE(got.ok()) << got.status();
    const Segments want = expected_segments(c["expected"]);
    for (size_t i = 0; i < std::max(got->size(), want.size()); ++i) {
      if (i >= got->size() || i >= want.size() || (*got)[i] != want[i]) {
        ADD_FAILURE() << "segment " << i << ": got "
                      << (i < got->size() ? show((*got)[i]) : "(none)") << ", want "
                      << (i < want.size() ? show(want[i]) : "(none)");
        break;
      }
    }
  }
}

TEST(XtmlGolden, RefusesWithClearMessages) {
  for (const auto& c : golden()["errors"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    StatusOr<Segments> got = render_chat(c["request"], options_of(c));
    ASSERT_FALSE(got.ok());
    EXPECT_EQ(got.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_CONTAINS(std::string(got.status().message()), c["error"].get<std::string>());
  }
}

// _normalize_vllm_chat_options: "on/EFFORT", "off", or the error.
std::string options_for(std::string_view fields) {
  StatusOr<ChatOptions> o =
      chat_options(ordered_json::parse(cat("{\"messages\": []", fields, "}")));
  if (!o.ok()) return std::string(o.status().message());
  return o->thinking ? "on/" + o->effort : "off";
}

TEST(ChatOptions, ReferencePrecedenceAndDefault) {
  EXPECT_EQ(options_for(""), "on/max");
  EXPECT_EQ(options_for(R"(, "thinking": null, "thinking_effort": null)"), "on/max");
  EXPECT_EQ(options_for(R"(, "enable_thinking": false)"), "off");
  EXPECT_EQ(options_for(R"(, "thinking": true, "enable_thinking": false)"), "on/max");
  EXPECT_EQ(options_for(R"(, "thinking": false, "enable_thinking": true)"), "off");
  EXPECT_EQ(options_for(R"(, "reasoning_effort": "none", "thinking": true)"), "off");
  EXPECT_EQ(options_for(R"(, "reasoning_effort": "low")"), "on/low");
  EXPECT_EQ(options_for(R"(, "reasoning_effort": "low", "thinking_effort": "high")"), "on/high");
  EXPECT_EQ(options_for(R"(, "reasoning_effort": "none", "thinking_effort": "low")"), "off");
}

TEST(ChatOptions, RefusalsNameTheFieldAndTheValues) {
  EXPECT_EQ(options_for(R"(, "thinking": false, "thinking_effort": "medium")"),
            "'thinking_effort' 'medium' is not supported; supported values: high, low, max");
  EXPECT_EQ(options_for(R"(, "reasoning_effort": "medium")"),
            "'reasoning_effort' 'medium' is not supported; supported values: high, low, max "
            "(the model's thinking_effort), or none");
  EXPECT_EQ(options_for(R"(, "reasoning_effort": "none", "thinking_effort": "x")"),
            "'thinking_effort' 'x' is not supported; supported values: high, low, max");
  EXPECT_EQ(options_for(R"(, "reasoning_effort": 1)"), "'reasoning_effort' must be a string");
  EXPECT_EQ(options_for(R"(, "enable_thinking": "no")"), "'enable_thinking' must be true or false");
  // thinking_enabled is the same normalisation.
  EXPECT_FALSE(*thinking_enabled(ordered_json::parse(R"({"reasoning_effort": "none"})")));
  EXPECT_FALSE(thinking_enabled(ordered_json::parse(R"({"thinking_effort": "min"})")).ok());
}

}  // namespace
}  // namespace k3::chat
