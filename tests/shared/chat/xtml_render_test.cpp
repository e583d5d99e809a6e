// shared/chat/xtml_render.cpp: the golden renderings
// (tests/data/chat/golden.json, written by hand from K3_MODEL.md and
// CHAT_STRINGS.md) and the refusals.
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

}  // namespace
}  // namespace k3::chat
