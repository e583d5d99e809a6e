// k3ctl chat's progress line before a reply's text: the words (the web
// page's, gateway/web/progress.mjs, tested alike in tests/web/progress_test.mjs)
// and the line rewritten in place on a terminal.
#include "tools/k3ctl/chat_progress.h"

#include <gtest/gtest.h>

namespace k3::tools {
namespace {

k3serve::v1::Progress progress(uint32_t queued, uint32_t done, uint32_t total, double eta_s) {
  k3serve::v1::Progress p;
  p.set_queued(queued);
  p.set_done(done);
  p.set_total(total);
  p.set_eta_s(eta_s);
  return p;
}

TEST(ChatProgress, CountsHaveThousandsSeparators) {
  EXPECT_EQ(format_count(0), "0");
  EXPECT_EQ(format_count(999), "999");
  EXPECT_EQ(format_count(1000), "1,000");
  EXPECT_EQ(format_count(3200), "3,200");
  EXPECT_EQ(format_count(1234567), "1,234,567");
}

TEST(ChatProgress, DurationsInSecondsMinutesAndHours) {
  EXPECT_EQ(format_duration(0), "1 s");
  EXPECT_EQ(format_duration(0.4), "1 s");
  EXPECT_EQ(format_duration(44.6), "45 s");
  EXPECT_EQ(format_duration(59.4), "59 s");
  EXPECT_EQ(format_duration(60), "1 min");
  EXPECT_EQ(format_duration(89), "1 min");
  EXPECT_EQ(format_duration(91), "2 min");
  EXPECT_EQ(format_duration(14 * 60 + 10), "14 min");
  EXPECT_EQ(format_duration(3569), "59 min");
  EXPECT_EQ(format_duration(3590), "1 h");
  EXPECT_EQ(format_duration(2 * 3600 + 5 * 60 + 10), "2 h 5 min");
  EXPECT_EQ(format_duration(26 * 3600), "26 h");
}

TEST(ChatProgress, TheWordsOfEachPhase) {
  // queued: the place in line, 1 = next to run.
  EXPECT_EQ(progress_text(progress(1, 0, 0, -1)), "waiting in line (next)");
  EXPECT_EQ(progress_text(progress(3, 0, 0, -1)), "waiting in line (2 ahead)");
  EXPECT_EQ(progress_text(progress(1201, 0, 0, -1)), "waiting in line (1,200 ahead)");
  // Admitted, before engined's first report.
  EXPECT_EQ(progress_text(progress(0, 0, 0, -1)), "starting");
  EXPECT_EQ(progress_text(progress(0, 3200, 10000, 14 * 60)),
            "reading your prompt: 3,200 of 10,000 tokens, about 14 min left");
  // No measured rate yet: no time left is guessed.
  EXPECT_EQ(progress_text(progress(0, 0, 10000, -1)), "reading your prompt: 0 of 10,000 tokens");
  // Read: the answer is about to start.
  EXPECT_EQ(progress_text(progress(0, 512, 512, 0)), "reading your prompt: 512 of 512 tokens");
}

TEST(ChatProgress, OnATerminalOneDimLineRewrittenInPlaceThenErased) {
  ProgressLine line(true, 80);
  EXPECT_FALSE(line.shown());
  EXPECT_EQ(line.clear(), "");  // nothing shown: nothing to erase
  EXPECT_EQ(line.show("waiting in line (1 ahead)"),
            "\r\x1b[2K\x1b[2mwaiting in line (1 ahead)\x1b[0m");
  EXPECT_TRUE(line.shown());
  EXPECT_EQ(line.show("waiting in line (1 ahead)"), "");  // unchanged: nothing written
  EXPECT_EQ(line.show("reading your prompt: 0 of 9 tokens"),
            "\r\x1b[2K\x1b[2mreading your prompt: 0 of 9 tokens\x1b[0m");
  EXPECT_EQ(line.clear(), "\r\x1b[2K");
  EXPECT_FALSE(line.shown());
  EXPECT_EQ(line.clear(), "");
}

TEST(ChatProgress, ANarrowTerminalGetsTheLineCutSoItNeverWraps) {
  ProgressLine line(true, 12);
  EXPECT_EQ(line.show("reading your prompt"), "\r\x1b[2K\x1b[2mreading you\x1b[0m");
  ProgressLine unknown(true, 0);
  EXPECT_EQ(unknown.show("reading your prompt"), "\r\x1b[2K\x1b[2mreading your prompt\x1b[0m");
}

TEST(ChatProgress, OffATerminalEachNewTextIsALineAndNothingIsErased) {
  ProgressLine line(false, 0);
  EXPECT_EQ(line.show("waiting in line (2 ahead)"), "[waiting in line (2 ahead)]\n");
  EXPECT_EQ(line.show("waiting in line (2 ahead)"), "");
  EXPECT_EQ(line.show("waiting in line (1 ahead)"), "[waiting in line (1 ahead)]\n");
  EXPECT_FALSE(line.shown());
  EXPECT_EQ(line.clear(), "");
}

}  // namespace
}  // namespace k3::tools
