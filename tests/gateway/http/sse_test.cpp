// gateway/http/sse.h: server-sent events framing, one line per event, and
// invalid UTF-8 replaced rather than thrown on the way out.
#include "gateway/http/sse.h"

#include <limits>
#include <string>

#include "gateway/core/json_text.h"
#include "gateway/http/chat_protocol.h"
#include "gtest/gtest.h"

namespace k3::gateway {
namespace {

using nlohmann::json;

TEST(Framing, Sse) {
  EXPECT_EQ(sse_event(json{{"a", 1}}), "data: {\"a\":1}\n\n");
  EXPECT_EQ(sse_done(), "data: [DONE]\n\n");
  // A newline inside a value is escaped, so an event is always one line.
  const std::string e = sse_event(json{{"t", "x\ny"}});
  EXPECT_EQ(e, "data: {\"t\":\"x\\ny\"}\n\n");
  EXPECT_EQ(e.find('\n'), e.size() - 2);
}

TEST(Framing, InvalidUtf8IsReplacedNotThrown) {
  OutputDelta d;
  d.content =
      "a\xff"
      "b";
  const std::string e = sse_event(chat_chunk_json("c", 1, "k3", d, false));
  EXPECT_NE(e.find("a\xef\xbf\xbd"
                   "b"),
            std::string::npos)
      << e;
  EXPECT_EQ(dump_body(json("\xc3")), "\"\xef\xbf\xbd\"");
}

// The comment lines of docs/openai-api.md ("Streams"), exactly.
TEST(Framing, ProgressComments) {
  ProgressNote n;
  n.phase = ProgressNote::Phase::kQueued;
  n.queued = 3;
  EXPECT_EQ(sse_progress_comment(n), ": queued 3\n\n");
  n = {};
  n.phase = ProgressNote::Phase::kPrefill;
  n.done = 3200;
  n.total = 10000;
  n.eta_s = 839.2;  // whole seconds, rounded up
  EXPECT_EQ(sse_progress_comment(n), ": prefill 3200/10000 eta_s=840\n\n");
  n.eta_s = 0;
  EXPECT_EQ(sse_progress_comment(n), ": prefill 3200/10000 eta_s=0\n\n");
  n.eta_s = -1;  // no rate measured yet: the estimate left out
  EXPECT_EQ(sse_progress_comment(n), ": prefill 3200/10000\n\n");
  n.eta_s = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(sse_progress_comment(n), ": prefill 3200/10000\n\n");
  n.eta_s = 1e300;
  EXPECT_EQ(sse_progress_comment(n), ": prefill 3200/10000\n\n");
  n.phase = ProgressNote::Phase::kKeepAlive;
  EXPECT_EQ(sse_progress_comment(n), ": keep-alive\n\n");
  n.phase = ProgressNote::Phase::kAdmitted;
  EXPECT_EQ(sse_progress_comment(n), "");
}

}  // namespace
}  // namespace k3::gateway
